// The _v2 calls that know their buffer's size: a buffer short by one float is refused with nothing
// changed, the exact size gives what the forms without a size give; the one rule for rows that cannot
// be sampled; and a step of late sequences alone equals each sequence stepped in a session of its own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "session_helpers.h"
#include "test_support.h"

namespace {

constexpr float kTolerance = 1e-4f;  // compiled fp32 kernels: reduction order only

gpt_sampler *greedy_sampler() {
    gpt_sampler_params p;
    REQUIRE(gpt_sampler_default_params(&p, sizeof p) == GPT_OK);
    p.temperature = 0.0f;
    gpt_sampler *s = nullptr;
    REQUIRE(gpt_sampler_create(&p, &s) == GPT_OK);
    return s;
}

gpt_sampler *seeded_sampler(uint64_t seed) {
    gpt_sampler_params p;
    REQUIRE(gpt_sampler_default_params(&p, sizeof p) == GPT_OK);
    p.seed = seed;
    gpt_sampler *s = nullptr;
    REQUIRE(gpt_sampler_create(&p, &s) == GPT_OK);
    return s;
}

constexpr float kUntouched = 12345.0f;  // what a refused call must leave in the buffer

}  // namespace

TEST_CASE("each _v2 session call refuses a logits buffer one float short, changing nothing", "[inference][v2]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size, n_seq = 3;
    const auto row = static_cast<size_t>(vocab), all = static_cast<size_t>(n_seq) * row;
    test::Session session(model.handle, n_seq);
    const std::vector<gpt_token> prompt = test::token_stream(1, 5, vocab);
    std::vector<float> logits(all, kUntouched);

    CHECK(gpt_session_prefill_seq_v2(session.handle, 1, prompt.data(), 5, logits.data(), row - 1) ==
          GPT_ERR_BUFFER_TOO_SMALL);
    CHECK(test::error_mentions(std::to_string(row - 1) + " floats"));
    CHECK(test::position_of(session.handle, 1) == 0);
    const gpt_token *prompts[] = {prompt.data(), prompt.data(), prompt.data()};
    const int32_t lengths[] = {5, 5, 5};
    CHECK(gpt_session_prefill_batch_v2(session.handle, prompts, lengths, logits.data(), all - 1) ==
          GPT_ERR_BUFFER_TOO_SMALL);
    for (int32_t seq = 0; seq < n_seq; ++seq) CHECK(test::position_of(session.handle, seq) == 0);
    CHECK(std::all_of(logits.begin(), logits.end(), [](float v) { return v == kUntouched; }));

    REQUIRE(gpt_session_prefill_batch_v2(session.handle, prompts, lengths, logits.data(), all) == GPT_OK);
    const gpt_token step[] = {7, 8, 9};
    std::fill(logits.begin(), logits.end(), kUntouched);
    CHECK(gpt_session_decode_seq_v2(session.handle, 2, 9, logits.data(), row - 1) == GPT_ERR_BUFFER_TOO_SMALL);
    CHECK(gpt_session_decode_batch_v2(session.handle, step, logits.data(), all - 1) == GPT_ERR_BUFFER_TOO_SMALL);
    CHECK(gpt_session_extend_seq_v2(session.handle, 0, step, 2, logits.data(), row - 1) == GPT_ERR_BUFFER_TOO_SMALL);
    gpt_sampler *samplers[] = {greedy_sampler(), greedy_sampler(), greedy_sampler()};
    gpt_token drawn[] = {-7, -7, -7};
    CHECK(gpt_session_decode_sample_batch_v2(session.handle, step, samplers, drawn, logits.data(), all - 1) ==
          GPT_ERR_BUFFER_TOO_SMALL);
    for (int32_t seq = 0; seq < n_seq; ++seq) CHECK(test::position_of(session.handle, seq) == 5);
    CHECK(std::all_of(logits.begin(), logits.end(), [](float v) { return v == kUntouched; }));
    CHECK(std::all_of(std::begin(drawn), std::end(drawn), [](gpt_token t) { return t == -7; }));

    // NULL asks for no logits where they are optional, and only with capacity 0; elsewhere NULL is refused.
    CHECK(gpt_session_extend_seq_v2(session.handle, 0, step, 2, nullptr, 1) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_decode_seq_v2(session.handle, 0, 7, nullptr, 0) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(test::position_of(session.handle, 0) == 5);
    REQUIRE(gpt_session_extend_seq_v2(session.handle, 0, step, 2, nullptr, 0) == GPT_OK);
    CHECK(test::position_of(session.handle, 0) == 7);
    REQUIRE(gpt_session_decode_sample_batch_v2(session.handle, step, samplers, drawn, nullptr, 0) == GPT_OK);
    CHECK(std::all_of(std::begin(drawn), std::end(drawn), [&](gpt_token t) { return t >= 0 && t < vocab; }));
    for (gpt_sampler *s : samplers) gpt_sampler_free(s);
}

TEST_CASE("the _v2 calls with the exact size give what the forms without a size give", "[inference][v2]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size, n_seq = 2;
    const auto row = static_cast<size_t>(vocab), all = static_cast<size_t>(n_seq) * row;
    const std::vector<gpt_token> a = test::token_stream(2, 6, vocab), b = test::token_stream(3, 4, vocab);
    test::Session old_calls(model.handle, n_seq), sized(model.handle, n_seq);
    std::vector<float> expected(all), got(all);

    REQUIRE(gpt_session_prefill_seq(old_calls.handle, 0, a.data(), 6, expected.data()) == GPT_OK);
    REQUIRE(gpt_session_prefill_seq_v2(sized.handle, 0, a.data(), 6, got.data(), row) == GPT_OK);
    CHECK(test::max_abs_diff(expected.data(), got.data(), vocab) < kTolerance);
    REQUIRE(gpt_session_prefill_seq(old_calls.handle, 1, b.data(), 4, expected.data()) == GPT_OK);
    REQUIRE(gpt_session_prefill_seq_v2(sized.handle, 1, b.data(), 4, got.data(), row) == GPT_OK);
    CHECK(test::max_abs_diff(expected.data(), got.data(), vocab) < kTolerance);

    const gpt_token step[] = {11, 12};
    REQUIRE(gpt_session_decode_batch(old_calls.handle, step, expected.data()) == GPT_OK);
    REQUIRE(gpt_session_decode_batch_v2(sized.handle, step, got.data(), all) == GPT_OK);
    CHECK(test::max_abs_diff(expected.data(), got.data(), 2 * vocab) < kTolerance);

    // decode_seq_v2 of sequence 1 = decode_batch with sequence 0 sitting out, row 1.
    const gpt_token second_only[] = {GPT_TOKEN_NONE, 13};
    REQUIRE(gpt_session_decode_batch(old_calls.handle, second_only, expected.data()) == GPT_OK);
    REQUIRE(gpt_session_decode_seq_v2(sized.handle, 1, 13, got.data(), row) == GPT_OK);
    CHECK(test::max_abs_diff(expected.data() + vocab, got.data(), vocab) < kTolerance);
    CHECK(test::position_of(sized.handle, 0) == 7);
    CHECK(test::position_of(sized.handle, 1) == 6);

    const gpt_token more[] = {14, 15, 16};
    REQUIRE(gpt_session_extend_seq(old_calls.handle, 0, more, 3, expected.data()) == GPT_OK);
    REQUIRE(gpt_session_extend_seq_v2(sized.handle, 0, more, 3, got.data(), row) == GPT_OK);
    CHECK(test::max_abs_diff(expected.data(), got.data(), vocab) < kTolerance);
}

TEST_CASE("sample_batch_v2 draws every row it can and refuses only the others, as decode_sample_batch",
          "[sampling][v2]") {
    const int32_t vocab = 50, rows = 3, n_top = 2;
    std::vector<float> logits(static_cast<size_t>(rows * vocab));
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.37f * static_cast<float>(i));
    logits[static_cast<size_t>(vocab) + 4] = std::numeric_limits<float>::quiet_NaN();  // row 1
    gpt_sampler *samplers[] = {seeded_sampler(5), seeded_sampler(6), seeded_sampler(7)};
    gpt_token tokens[rows];
    std::vector<gpt_token_logprob> logprobs(static_cast<size_t>(rows * (1 + n_top)), {-9, 1.0f});

    // The first form refuses the whole call and draws nothing.
    CHECK(gpt_sampler_sample_batch(samplers, rows, logits.data(), vocab, tokens, n_top, logprobs.data()) ==
          GPT_ERR_NON_FINITE);
    REQUIRE(gpt_sampler_sample_batch_v2(samplers, rows, logits.data(), vocab, tokens, n_top, logprobs.data()) ==
            GPT_ERR_NON_FINITE);
    CHECK(test::error_mentions("row 1:"));
    CHECK(tokens[1] == GPT_TOKEN_NONE);
    for (int32_t k = 0; k <= n_top; ++k) {
        CHECK(logprobs[static_cast<size_t>(1 + n_top + k)].token == GPT_TOKEN_NONE);
        CHECK(std::isinf(logprobs[static_cast<size_t>(1 + n_top + k)].logprob));
    }
    // Rows 0 and 2 drew what a fresh sampler of their seed draws from them alone, with its log-probabilities.
    for (const int32_t r : {0, 2}) {
        gpt_sampler *fresh = seeded_sampler(5 + static_cast<uint64_t>(r));
        gpt_token alone = -1;
        std::vector<gpt_token_logprob> alone_logprobs(1 + n_top);
        REQUIRE(gpt_sampler_sample_batch(&fresh, 1, logits.data() + r * vocab, vocab, &alone, n_top,
                                         alone_logprobs.data()) == GPT_OK);
        CHECK(tokens[r] == alone);
        for (int32_t k = 0; k <= n_top; ++k) {
            CHECK(logprobs[static_cast<size_t>(r * (1 + n_top) + k)].token == alone_logprobs[k].token);
            CHECK(logprobs[static_cast<size_t>(r * (1 + n_top) + k)].logprob == alone_logprobs[k].logprob);
        }
        gpt_sampler_free(fresh);
    }
    // Row 1's sampler drew nothing: on finite logits it draws a fresh sampler's first token.
    logits[static_cast<size_t>(vocab) + 4] = 0.5f;
    gpt_sampler *fresh = seeded_sampler(6);
    gpt_token after = -1, expected = -2;
    REQUIRE(gpt_sampler_sample_batch_v2(&samplers[1], 1, logits.data() + vocab, vocab, &after, 0, nullptr) == GPT_OK);
    REQUIRE(gpt_sampler_sample_batch_v2(&fresh, 1, logits.data() + vocab, vocab, &expected, 0, nullptr) == GPT_OK);
    CHECK(after == expected);
    gpt_sampler_free(fresh);
    for (gpt_sampler *s : samplers) gpt_sampler_free(s);
}

TEST_CASE("a step of late sequences alone equals each stepped in its own session, however long the others are",
          "[inference][batch][v2]") {
    // Sequence 0 holds a long cache and sits out; sequences 2 and 4 step (3 sits out between them): the step
    // runs rows 2..4 only, and each stepping row's logits are its own session's.
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size, n_seq = 5;
    const auto row = static_cast<size_t>(vocab);
    test::Session batch(model.handle, n_seq);
    std::vector<float> logits(static_cast<size_t>(n_seq) * row);
    const int32_t long_length = std::min(model.info.block_size - 1, 60);
    const std::vector<gpt_token> long_prompt = test::token_stream(9, long_length, vocab);
    REQUIRE(gpt_session_prefill_seq_v2(batch.handle, 0, long_prompt.data(), long_length, logits.data(), row) == GPT_OK);
    for (const int32_t seq : {2, 3, 4}) {
        const std::vector<gpt_token> p = test::token_stream(seq, 3 + seq, vocab);
        REQUIRE(gpt_session_prefill_seq_v2(batch.handle, seq, p.data(), 3 + seq, logits.data(), row) == GPT_OK);
    }
    std::vector<float> batch_logits(logits.size(), kUntouched);
    for (int32_t step = 0; step < 3; ++step) {
        const gpt_token tokens[] = {GPT_TOKEN_NONE, GPT_TOKEN_NONE, 20 + step, GPT_TOKEN_NONE, 30 + step};
        REQUIRE(gpt_session_decode_batch_v2(batch.handle, tokens, batch_logits.data(), batch_logits.size()) == GPT_OK);
    }
    CHECK(test::position_of(batch.handle, 0) == long_length);
    CHECK(test::position_of(batch.handle, 3) == 6);
    CHECK(batch_logits[0] == kUntouched);  // a row that sat out is left as it was
    for (const int32_t seq : {2, 4}) {
        CAPTURE(seq);
        test::Session alone(model.handle);
        std::vector<float> expected(row);
        const std::vector<gpt_token> p = test::token_stream(seq, 3 + seq, vocab);
        REQUIRE(gpt_session_prefill_seq_v2(alone.handle, 0, p.data(), 3 + seq, expected.data(), row) == GPT_OK);
        for (int32_t step = 0; step < 3; ++step)
            REQUIRE(gpt_session_decode_seq_v2(alone.handle, 0, (seq == 2 ? 20 : 30) + step, expected.data(), row) ==
                    GPT_OK);
        CHECK(test::max_abs_diff(expected.data(), batch_logits.data() + static_cast<size_t>(seq) * row, vocab) <
              kTolerance);
    }
    // Sequence 0's cache is intact: its next step equals a session that only ever held its prompt.
    test::Session alone(model.handle);
    std::vector<float> expected(row), got(row);
    REQUIRE(gpt_session_prefill_seq_v2(alone.handle, 0, long_prompt.data(), long_length, expected.data(), row) ==
            GPT_OK);
    REQUIRE(gpt_session_decode_seq_v2(alone.handle, 0, 5, expected.data(), row) == GPT_OK);
    REQUIRE(gpt_session_decode_seq_v2(batch.handle, 0, 5, got.data(), row) == GPT_OK);
    CHECK(test::max_abs_diff(expected.data(), got.data(), vocab) < kTolerance);
}
