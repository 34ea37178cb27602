// gpt_session_append_sample_batch: decode steps and prompt pieces of several sequences in one call, with the
// artifact's mixed graph (long-context: one pass) and without it (tiny-flash: extend calls and a decode step),
// against each sequence prefilled whole in a session of its own; and the statuses of bad arguments.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "session_helpers.h"
#include "test_support.h"

namespace {

constexpr float kTolerance = 1e-4f;  // compiled fp32 kernels differ from one another by reduction order only

// The logits after prefilling `tokens` whole, in a fresh single-sequence session.
std::vector<float> prefilled(gpt_model *model, const std::vector<gpt_token> &tokens, int32_t vocab) {
    test::Session alone(model);
    std::vector<float> logits(static_cast<size_t>(vocab));
    REQUIRE(gpt_session_prefill_seq_v2(alone.handle, 0, tokens.data(), static_cast<int32_t>(tokens.size()),
                                       logits.data(), logits.size()) == GPT_OK);
    return logits;
}

std::vector<gpt_token> first(const std::vector<gpt_token> &tokens, size_t n) {
    return {tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n)};
}

gpt_token argmax(const std::vector<float> &logits) {
    return static_cast<gpt_token>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

struct Greedy {
    std::vector<gpt_sampler *> samplers;
    explicit Greedy(int n) : samplers(static_cast<size_t>(n), nullptr) {
        gpt_sampler_params p;
        REQUIRE(gpt_sampler_default_params(&p, sizeof p) == GPT_OK);
        p.temperature = 0.0f;
        for (gpt_sampler *&s : samplers) REQUIRE(gpt_sampler_create(&p, &s) == GPT_OK);
    }
    ~Greedy() {
        for (gpt_sampler *s : samplers) gpt_sampler_free(s);
    }
};

// Sequence seq's row of `rows` (n_seq rows of vocab floats).
std::vector<float> row_of(const std::vector<float> &rows, int seq, int32_t vocab) {
    return {rows.begin() + int64_t{seq} * vocab, rows.begin() + int64_t{seq + 1} * vocab};
}

}  // namespace

TEST_CASE("one append call steps some sequences and prefills pieces of others, as whole prefills give them",
          "[inference][sequences][append]") {
    const bool mixed = GENERATE(true, false);
    test::Model model(mixed ? test::long_context_artifact() : test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    CHECK(model.info.mixed_graph == mixed);
    const int32_t vocab = model.info.vocab_size;
    std::vector<std::vector<gpt_token>> text;
    for (int32_t seed = 0; seed < 4; ++seed) text.push_back(test::token_stream(11 + seed, 30, vocab));

    test::Session session(model.handle, 4);
    std::vector<float> rows(static_cast<size_t>(4 * vocab));
    REQUIRE(gpt_session_prefill_seq_v2(session.handle, 0, text[0].data(), 20, rows.data(), rows.size()) == GPT_OK);
    REQUIRE(gpt_session_prefill_seq_v2(session.handle, 2, text[2].data(), 10, rows.data(), rows.size()) == GPT_OK);
    Greedy greedy(4);
    std::vector<gpt_token> out(4, 0);

    // Sequence 0 steps, 1 takes a 7-token prompt and draws its first token, 2 a piece of 5 without drawing,
    // 3 a one-token prompt and draws.
    const gpt_token *tokens[] = {text[0].data() + 20, text[1].data(), text[2].data() + 10, text[3].data()};
    const int32_t n_tokens[] = {1, 7, 5, 1};
    gpt_sampler *draws[] = {greedy.samplers[0], greedy.samplers[1], nullptr, greedy.samplers[3]};
    std::fill(rows.begin(), rows.end(), std::numeric_limits<float>::quiet_NaN());
    REQUIRE(gpt_session_append_sample_batch(session.handle, tokens, n_tokens, draws, out.data(), rows.data(),
                                            rows.size()) == GPT_OK);
    const std::vector<size_t> held = {21, 7, 15, 1};
    for (int seq = 0; seq < 4; ++seq) CHECK(test::position_of(session.handle, seq) == static_cast<int32_t>(held[seq]));
    for (int seq : {0, 1, 3}) {
        INFO("sequence " << seq);
        const std::vector<float> expected = prefilled(model.handle, first(text[seq], held[seq]), vocab);
        const std::vector<float> got = row_of(rows, seq, vocab);
        CHECK(test::max_abs_diff(got.data(), expected.data(), vocab) < kTolerance);
        CHECK(out[seq] == argmax(expected));
    }
    CHECK(out[2] == GPT_TOKEN_NONE);
    CHECK(std::isnan(rows[static_cast<size_t>(2 * vocab)]));  // not drawn: its row is not written

    // Then 1 steps, 2 takes its last two prompt tokens and draws, 0 and 3 sit out (no logits asked).
    const gpt_token *next[] = {nullptr, text[1].data() + 7, text[2].data() + 15, nullptr};
    const int32_t n_next[] = {0, 1, 2, 0};
    REQUIRE(gpt_session_append_sample_batch(session.handle, next, n_next, greedy.samplers.data(), out.data(), nullptr,
                                            0) == GPT_OK);
    CHECK(out[0] == GPT_TOKEN_NONE);
    CHECK(out[3] == GPT_TOKEN_NONE);
    CHECK(out[1] == argmax(prefilled(model.handle, first(text[1], 8), vocab)));
    CHECK(out[2] == argmax(prefilled(model.handle, first(text[2], 17), vocab)));
    CHECK(test::position_of(session.handle, 2) == 17);

    // A decode step after it continues each sequence: the cache holds every appended token.
    const gpt_token step[] = {GPT_TOKEN_NONE, GPT_TOKEN_NONE, text[2][17], GPT_TOKEN_NONE};
    REQUIRE(gpt_session_decode_batch_v2(session.handle, step, rows.data(), rows.size()) == GPT_OK);
    const std::vector<float> expected = prefilled(model.handle, first(text[2], 18), vocab);
    CHECK(test::max_abs_diff(row_of(rows, 2, vocab).data(), expected.data(), vocab) < kTolerance);
}

TEST_CASE("bad append calls return their status and change nothing", "[inference][sequences][append][bad_calls]") {
    test::Model model(test::long_context_artifact());
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size;
    const auto text = test::token_stream(3, 20, vocab);
    test::Session session(model.handle, 2);
    std::vector<float> rows(static_cast<size_t>(2 * vocab));
    REQUIRE(gpt_session_prefill_seq_v2(session.handle, 0, text.data(), 4, rows.data(), rows.size()) == GPT_OK);
    Greedy greedy(2);
    std::vector<gpt_token> out(2, 0);
    const auto call = [&](std::vector<gpt_token> a, std::vector<gpt_token> b, gpt_sampler *sa, gpt_sampler *sb,
                          size_t capacity = 0) {
        const gpt_token *tokens[] = {a.data(), b.data()};
        const int32_t n[] = {static_cast<int32_t>(a.size()), static_cast<int32_t>(b.size())};
        gpt_sampler *samplers[] = {sa, sb};
        return gpt_session_append_sample_batch(session.handle, tokens, n, samplers, out.data(),
                                               capacity ? rows.data() : nullptr, capacity);
    };
    CHECK(call({text[4]}, {vocab}, greedy.samplers[0], nullptr) == GPT_ERR_OUT_OF_RANGE);
    CHECK(test::error_mentions("token id"));
    CHECK(call(std::vector<gpt_token>(static_cast<size_t>(model.info.block_size) - 3, 1), {}, nullptr, nullptr) ==
          GPT_ERR_OUT_OF_RANGE);
    CHECK(test::error_mentions("exceed the context"));
    CHECK(call({}, {}, nullptr, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(call({text[4]}, {text[0]}, greedy.samplers[0], greedy.samplers[0]) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(test::error_mentions("has the sampler of sequence 0"));
    CHECK(call({text[4]}, {}, greedy.samplers[0], nullptr, rows.size() - 1) == GPT_ERR_BUFFER_TOO_SMALL);
    CHECK(test::position_of(session.handle, 0) == 4);
    CHECK(test::position_of(session.handle, 1) == 0);
    CHECK(call({text[4]}, {}, greedy.samplers[0], nullptr) == GPT_OK);  // and the same call, right, runs
    CHECK(test::position_of(session.handle, 0) == 5);
}
