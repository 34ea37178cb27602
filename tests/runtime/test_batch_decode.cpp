// Batched sessions: sequences of different lengths prefilled and decoded in one call, each
// against eager PyTorch or its own single-sequence session; sitting out; bad calls;
// a step reads the cache only up to its span.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/tensor.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "exec/model.h"
#include "session_helpers.h"
#include "test_support.h"

namespace {

constexpr float kTolerance = 1e-4f;  // compiled fp32 kernels differ from eager by reduction order only

std::vector<gpt_token> tokens_of(const at::Tensor &t) {
    const at::Tensor c = t.to(at::kInt).contiguous();
    return std::vector<gpt_token>(c.data_ptr<int32_t>(), c.data_ptr<int32_t>() + c.numel());
}

// Puts the prefill graph, which cannot take decode's inputs, in place of `graph`: every call routed to it fails.
void replace_by_prefill(const test::ScratchArtifact &art, const std::string &graph) {
    std::filesystem::copy_file(art.file("prefill.pt2"), art.file(graph),
                               std::filesystem::copy_options::overwrite_existing);
    art.rehash(graph);
}

}  // namespace

TEST_CASE("a batched session decodes sequences of different lengths in one call, each as if alone",
          "[inference][batch]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size;
    const auto ref = test::reference();
    const auto ref_prompt = tokens_of(ref.at("prompt"));
    const auto ref_steps = tokens_of(ref.at("decode_tokens"));
    const at::Tensor ref_logits = ref.at("logits").to(at::kFloat).contiguous();  // (1 + steps, vocab), eager

    // Sequence 1 is the eager reference's; 0 and 2 are longer and shorter streams.
    const int32_t n_seq = 3, steps = static_cast<int32_t>(ref_steps.size());
    const std::vector<int32_t> prompt_len = {9, static_cast<int32_t>(ref_prompt.size()), 2};
    std::vector<std::vector<gpt_token>> seqs = {
        test::token_stream(1, 9 + steps, vocab), {}, test::token_stream(2, 2 + steps, vocab)};
    seqs[1] = ref_prompt;
    seqs[1].insert(seqs[1].end(), ref_steps.begin(), ref_steps.end());

    test::Session batch(model.handle, n_seq);
    std::vector<float> logits(static_cast<size_t>(n_seq * vocab));
    std::vector<std::vector<float>> batched(n_seq);  // every row's logits after prefill and each step, in order
    for (int32_t s = 0; s < n_seq; ++s) {
        float *row = logits.data() + s * vocab;
        REQUIRE(gpt_session_prefill_seq(batch.handle, s, seqs[s].data(), prompt_len[s], row) == GPT_OK);
        batched[s].assign(row, row + vocab);
    }
    for (int32_t i = 0; i < steps; ++i) {
        std::vector<gpt_token> tokens(n_seq);
        for (int32_t s = 0; s < n_seq; ++s) tokens[s] = seqs[s][prompt_len[s] + i];
        REQUIRE(gpt_session_decode_batch(batch.handle, tokens.data(), logits.data()) == GPT_OK);
        for (int32_t s = 0; s < n_seq; ++s)
            batched[s].insert(batched[s].end(), logits.data() + s * vocab, logits.data() + (s + 1) * vocab);
    }
    for (int32_t s = 0; s < n_seq; ++s) CHECK(test::position_of(batch.handle, s) == prompt_len[s] + steps);

    SECTION("the reference sequence's rows equal eager PyTorch") {
        for (int32_t i = 0; i <= steps; ++i)
            CHECK(test::max_abs_diff(batched[1].data() + i * vocab, ref_logits[i].data_ptr<float>(), vocab) <
                  kTolerance);
    }
    SECTION("every sequence's rows equal its own single-sequence session") {
        for (int32_t s = 0; s < n_seq; ++s) {
            test::Session alone(model.handle);
            std::vector<float> expected(static_cast<size_t>(vocab));
            REQUIRE(gpt_session_prefill(alone.handle, seqs[s].data(), prompt_len[s], expected.data()) == GPT_OK);
            CHECK(test::max_abs_diff(batched[s].data(), expected.data(), vocab) < kTolerance);
            for (int32_t i = 0; i < steps; ++i) {
                REQUIRE(gpt_session_decode(alone.handle, seqs[s][prompt_len[s] + i], expected.data()) == GPT_OK);
                CHECK(test::max_abs_diff(batched[s].data() + (i + 1) * vocab, expected.data(), vocab) < kTolerance);
            }
        }
    }
}

TEST_CASE("a sequence that sits out keeps its position, its logits row and its cache", "[inference][batch]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size, n_seq = 2;
    const auto a = test::token_stream(3, 12, vocab), b = test::token_stream(4, 12, vocab);
    test::Session batch(model.handle, n_seq), alone(model.handle);
    std::vector<float> logits(static_cast<size_t>(n_seq * vocab)), expected(static_cast<size_t>(vocab));
    REQUIRE(gpt_session_prefill_seq(batch.handle, 0, a.data(), 4, logits.data()) == GPT_OK);
    REQUIRE(gpt_session_prefill_seq(batch.handle, 1, b.data(), 4, logits.data() + vocab) == GPT_OK);
    REQUIRE(gpt_session_prefill(alone.handle, b.data(), 4, expected.data()) == GPT_OK);

    // Sequence 1 sits out three steps of sequence 0; its row must stay as the sentinel left it.
    const float sentinel = std::numeric_limits<float>::quiet_NaN();
    for (int32_t i = 0; i < 3; ++i) {
        std::fill(logits.begin() + vocab, logits.end(), sentinel);
        const gpt_token tokens[] = {a[static_cast<size_t>(4 + i)], GPT_TOKEN_NONE};
        REQUIRE(gpt_session_decode_batch(batch.handle, tokens, logits.data()) == GPT_OK);
        CHECK(std::isnan(logits[static_cast<size_t>(vocab)]));
        CHECK(std::isnan(logits.back()));
        CHECK(!std::isnan(logits[0]));
    }
    CHECK(test::position_of(batch.handle, 0) == 7);
    CHECK(test::position_of(batch.handle, 1) == 4);

    // Then both step: sequence 1 goes on exactly as a session that never paused.
    for (int32_t i = 0; i < 4; ++i) {
        const gpt_token tokens[] = {a[static_cast<size_t>(7 + i)], b[static_cast<size_t>(4 + i)]};
        REQUIRE(gpt_session_decode_batch(batch.handle, tokens, logits.data()) == GPT_OK);
        REQUIRE(gpt_session_decode(alone.handle, tokens[1], expected.data()) == GPT_OK);
        CHECK(test::max_abs_diff(logits.data() + vocab, expected.data(), vocab) < kTolerance);
    }
}

TEST_CASE("prefill, decode and generate on a batched session touch sequence 0 only: another's cache is as it was",
          "[inference][batch]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size;
    const auto a = test::token_stream(5, 8, vocab), b = test::token_stream(6, 8, vocab);
    test::Session batch(model.handle, 4), alone(model.handle);
    std::vector<float> logits(static_cast<size_t>(vocab)), expected(static_cast<size_t>(vocab));
    REQUIRE(gpt_session_prefill_seq(batch.handle, 3, b.data(), 6, logits.data()) == GPT_OK);

    REQUIRE(gpt_session_prefill(batch.handle, a.data(), 5, logits.data()) == GPT_OK);
    REQUIRE(gpt_session_decode(batch.handle, a[5], logits.data()) == GPT_OK);
    {
        test::Session a_alone(model.handle);
        REQUIRE(gpt_session_prefill(a_alone.handle, a.data(), 5, expected.data()) == GPT_OK);
        REQUIRE(gpt_session_decode(a_alone.handle, a[5], expected.data()) == GPT_OK);
        CHECK(test::max_abs_diff(logits.data(), expected.data(), vocab) < kTolerance);
        int32_t position = 0;
        REQUIRE(gpt_session_get_position(batch.handle, &position) == GPT_OK);
        CHECK(position == 6);
    }
    gpt_generate_params params = test::default_generate_params();
    params.max_new_tokens = 6;
    params.temperature = 0.0f;
    params.stop_at_eos = false;
    std::vector<gpt_token> got(6), want(6);
    int32_t n_got = 0, n_want = 0;
    REQUIRE(gpt_session_generate(batch.handle, a.data(), 4, &params, got.data(), 6, &n_got) == GPT_OK);
    REQUIRE(gpt_session_generate(alone.handle, a.data(), 4, &params, want.data(), 6, &n_want) == GPT_OK);
    CHECK(got == want);
    CHECK(n_got == n_want);
    CHECK(test::position_of(batch.handle, 0) == test::position_of(alone.handle, 0));
    for (int32_t seq : {1, 2}) CHECK(test::position_of(batch.handle, seq) == 0);
    CHECK(test::position_of(batch.handle, 3) == 6);

    // Sequence 3's next step gives the logits of its tokens decoded alone: its cache was not written.
    std::vector<gpt_token> step(4, GPT_TOKEN_NONE);
    step[3] = b[6];
    std::vector<float> rows(static_cast<size_t>(4 * vocab));
    REQUIRE(gpt_session_decode_batch(batch.handle, step.data(), rows.data()) == GPT_OK);
    test::Session b_alone(model.handle);
    REQUIRE(gpt_session_prefill(b_alone.handle, b.data(), 6, expected.data()) == GPT_OK);
    REQUIRE(gpt_session_decode(b_alone.handle, b[6], expected.data()) == GPT_OK);
    CHECK(test::max_abs_diff(rows.data() + 3 * vocab, expected.data(), vocab) < kTolerance);
    // reset is the one call without _seq that acts on every sequence.
    REQUIRE(gpt_session_reset(batch.handle) == GPT_OK);
    CHECK(test::position_of(batch.handle, 0) == 0);
    CHECK(test::position_of(batch.handle, 3) == 0);
}

TEST_CASE("bad batched calls are refused before anything changes", "[inference][batch]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size, block = model.info.block_size;
    gpt_session *none = nullptr;
    CHECK(gpt_session_create_batch(model.handle, 0, &none) == GPT_ERR_OUT_OF_RANGE);
    CHECK(gpt_session_create_batch(model.handle, model.info.max_batch + 1, &none) == GPT_ERR_OUT_OF_RANGE);
    CHECK(test::error_mentions("max_batch"));
    CHECK(none == nullptr);
    {
        test::Session largest(model.handle, model.info.max_batch);
        CHECK(largest.handle != nullptr);
    }

    test::Session batch(model.handle, 3);
    const auto a = test::token_stream(7, block, vocab);
    std::vector<float> logits(static_cast<size_t>(3 * vocab), 0.5f);
    CHECK(gpt_session_prefill_seq(batch.handle, 3, a.data(), 4, logits.data()) == GPT_ERR_OUT_OF_RANGE);
    CHECK(gpt_session_prefill_seq(batch.handle, -1, a.data(), 4, logits.data()) == GPT_ERR_OUT_OF_RANGE);
    int32_t position = 0;
    CHECK(gpt_session_get_position_seq(batch.handle, 3, &position) == GPT_ERR_OUT_OF_RANGE);
    REQUIRE(gpt_session_prefill_seq(batch.handle, 0, a.data(), 4, logits.data()) == GPT_OK);
    REQUIRE(gpt_session_prefill_seq(batch.handle, 2, a.data(), block, logits.data() + 2 * vocab) == GPT_OK);
    std::fill(logits.begin(), logits.end(), 0.5f);

    const gpt_token bad_token[] = {a[4], GPT_TOKEN_NONE, vocab};
    CHECK(gpt_session_decode_batch(batch.handle, bad_token, logits.data()) == GPT_ERR_OUT_OF_RANGE);
    CHECK(test::error_mentions("sequence 2"));
    const gpt_token not_prefilled[] = {a[4], a[4], GPT_TOKEN_NONE};
    CHECK(gpt_session_decode_batch(batch.handle, not_prefilled, logits.data()) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(test::error_mentions("sequence 1"));
    const gpt_token full[] = {a[4], GPT_TOKEN_NONE, a[4]};
    CHECK(gpt_session_decode_batch(batch.handle, full, logits.data()) == GPT_ERR_OUT_OF_RANGE);
    CHECK(test::error_mentions("full"));
    const gpt_token idle[] = {GPT_TOKEN_NONE, GPT_TOKEN_NONE, GPT_TOKEN_NONE};
    CHECK(gpt_session_decode_batch(batch.handle, idle, logits.data()) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_decode(batch.handle, GPT_TOKEN_NONE, logits.data()) == GPT_ERR_OUT_OF_RANGE);
    CHECK(gpt_session_decode_batch(batch.handle, nullptr, logits.data()) == GPT_ERR_INVALID_ARGUMENT);

    // Nothing moved and no output was written.
    CHECK(test::position_of(batch.handle, 0) == 4);
    CHECK(test::position_of(batch.handle, 1) == 0);
    CHECK(test::position_of(batch.handle, 2) == block);
    CHECK(std::all_of(logits.begin(), logits.end(), [](float v) { return v == 0.5f; }));
    // The full sequence sits out while sequence 0 steps, then starts again from a prefill.
    const gpt_token step[] = {a[4], GPT_TOKEN_NONE, GPT_TOKEN_NONE};
    CHECK(gpt_session_decode_batch(batch.handle, step, logits.data()) == GPT_OK);
    CHECK(test::position_of(batch.handle, 0) == 5);
    CHECK(gpt_session_prefill_seq(batch.handle, 2, a.data(), 3, logits.data() + 2 * vocab) == GPT_OK);
    CHECK(test::position_of(batch.handle, 2) == 3);
}

TEST_CASE("a batched prefill of prompts of different lengths equals each sequence's own prefill",
          "[inference][batch]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size, n_seq = 5, steps = 3;
    // Runs of adjacent prompts: {0, 1} (9 and 1 tokens: one padded), then {3, 4} (12 and 12);
    // sequence 2 sits out, holding a cache of its own from an earlier prefill.
    const std::vector<int32_t> lengths = {9, 1, 0, 12, 12};
    std::vector<std::vector<gpt_token>> seqs;
    for (int32_t s = 0; s < n_seq; ++s) seqs.push_back(test::token_stream(10 + s, 12 + steps, vocab));
    test::Session batch(model.handle, n_seq);
    std::vector<float> logits(static_cast<size_t>(n_seq * vocab));
    REQUIRE(gpt_session_prefill_seq(batch.handle, 2, seqs[2].data(), 6, logits.data()) == GPT_OK);

    const float sentinel = std::numeric_limits<float>::quiet_NaN();
    std::fill(logits.begin(), logits.end(), sentinel);
    std::vector<const gpt_token *> prompts;
    for (const auto &s : seqs) prompts.push_back(s.data());
    REQUIRE(gpt_session_prefill_batch(batch.handle, prompts.data(), lengths.data(), logits.data()) == GPT_OK);
    CHECK(std::isnan(logits[static_cast<size_t>(2 * vocab)]));  // the row of the sequence that sat out
    for (int32_t s = 0; s < n_seq; ++s) CHECK(test::position_of(batch.handle, s) == (s == 2 ? 6 : lengths[s]));

    std::vector<std::vector<float>> batched(n_seq);  // every row's logits after prefill and each step
    for (int32_t s = 0; s < n_seq; ++s) batched[s].assign(logits.data() + s * vocab, logits.data() + (s + 1) * vocab);
    for (int32_t i = 0; i < steps; ++i) {  // then all five step together, sequence 2 included
        std::vector<gpt_token> tokens(n_seq);
        for (int32_t s = 0; s < n_seq; ++s) tokens[s] = seqs[s][(s == 2 ? 6 : lengths[s]) + i];
        REQUIRE(gpt_session_decode_batch(batch.handle, tokens.data(), logits.data()) == GPT_OK);
        for (int32_t s = 0; s < n_seq; ++s)
            batched[s].insert(batched[s].end(), logits.data() + s * vocab, logits.data() + (s + 1) * vocab);
    }
    for (int32_t s = 0; s < n_seq; ++s) {
        CAPTURE(s);
        const int32_t n_prompt = s == 2 ? 6 : lengths[s];
        test::Session alone(model.handle);
        std::vector<float> expected(static_cast<size_t>(vocab));
        REQUIRE(gpt_session_prefill(alone.handle, seqs[s].data(), n_prompt, expected.data()) == GPT_OK);
        if (s != 2) CHECK(test::max_abs_diff(batched[s].data(), expected.data(), vocab) < kTolerance);
        for (int32_t i = 0; i < steps; ++i) {
            REQUIRE(gpt_session_decode(alone.handle, seqs[s][n_prompt + i], expected.data()) == GPT_OK);
            CHECK(test::max_abs_diff(batched[s].data() + (i + 1) * vocab, expected.data(), vocab) < kTolerance);
        }
    }
}

TEST_CASE("a bad batched prefill is refused before anything changes", "[inference][batch]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size, block = model.info.block_size;
    test::Session batch(model.handle, 3);
    auto a = test::token_stream(8, block + 1, vocab);
    std::vector<float> logits(static_cast<size_t>(3 * vocab), 0.5f);
    REQUIRE(gpt_session_prefill_seq(batch.handle, 1, a.data(), 5, logits.data()) == GPT_OK);
    std::fill(logits.begin(), logits.end(), 0.5f);
    std::vector<gpt_token> bad = a;
    bad[2] = vocab;
    const gpt_token *prompts[] = {a.data(), a.data(), bad.data()};

    const int32_t bad_token[] = {4, 0, 3};
    CHECK(gpt_session_prefill_batch(batch.handle, prompts, bad_token, logits.data()) == GPT_ERR_OUT_OF_RANGE);
    CHECK(test::error_mentions("sequence 2: token id"));
    const int32_t too_long[] = {block + 1, 0, 0};
    CHECK(gpt_session_prefill_batch(batch.handle, prompts, too_long, logits.data()) == GPT_ERR_OUT_OF_RANGE);
    CHECK(test::error_mentions("sequence 0: prompt of"));
    const int32_t negative[] = {4, -1, 0};
    CHECK(gpt_session_prefill_batch(batch.handle, prompts, negative, logits.data()) == GPT_ERR_INVALID_ARGUMENT);
    const int32_t none[] = {0, 0, 0};
    CHECK(gpt_session_prefill_batch(batch.handle, prompts, none, logits.data()) == GPT_ERR_INVALID_ARGUMENT);
    const gpt_token *null_prompt[] = {a.data(), nullptr, a.data()};
    const int32_t lengths[] = {4, 4, 4};
    CHECK(gpt_session_prefill_batch(batch.handle, null_prompt, lengths, logits.data()) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_prefill_batch(batch.handle, nullptr, lengths, logits.data()) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_session_prefill_batch(batch.handle, prompts, nullptr, logits.data()) == GPT_ERR_INVALID_ARGUMENT);

    CHECK(test::position_of(batch.handle, 0) == 0);
    CHECK(test::position_of(batch.handle, 1) == 5);
    CHECK(test::position_of(batch.handle, 2) == 0);
    CHECK(std::all_of(logits.begin(), logits.end(), [](float v) { return v == 0.5f; }));
}

TEST_CASE("a batched prefill that fails while running leaves its sequences empty and the others as they were",
          "[inference][batch]") {
    // decode.pt2 replaced by the prefill graph: the step that gives shorter prompts their
    // logits fails once it covers several rows; a run of equal prompts needs no step.
    test::ScratchArtifact art(test::artifact("flash"));
    replace_by_prefill(art, "decode.pt2");
    test::Model model(art.dir());
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size;
    const auto a = test::token_stream(9, 8, vocab);
    test::Session batch(model.handle, 4);
    std::vector<float> logits(static_cast<size_t>(4 * vocab));
    REQUIRE(gpt_session_prefill_seq(batch.handle, 3, a.data(), 6, logits.data() + 3 * vocab) == GPT_OK);
    const gpt_token *prompts[] = {a.data(), a.data(), a.data(), a.data()};
    const int32_t ragged[] = {5, 3, 2, 0};
    CHECK(gpt_session_prefill_batch(batch.handle, prompts, ragged, logits.data()) == GPT_ERR_INTERNAL);
    for (int32_t s = 0; s < 3; ++s) CHECK(test::position_of(batch.handle, s) == 0);
    CHECK(test::position_of(batch.handle, 3) == 6);
    const int32_t equal[] = {4, 4, 4, 0};
    REQUIRE(gpt_session_prefill_batch(batch.handle, prompts, equal, logits.data()) == GPT_OK);
    for (int32_t s = 0; s < 3; ++s) CHECK(test::position_of(batch.handle, s) == 4);
}

TEST_CASE("one stepping sequence runs decode_one, several run the batched decode", "[inference][batch]") {
    // decode_one.pt2 replaced by a graph that cannot take decode's inputs (the
    // prefill): every call that routes one row to it fails, a batch does not.
    test::ScratchArtifact art(test::artifact("flash"));
    replace_by_prefill(art, "decode_one.pt2");
    test::Model model(art.dir());
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size;
    const auto ref = test::reference();
    const auto prompt = tokens_of(ref.at("prompt"));
    const auto steps = tokens_of(ref.at("decode_tokens"));
    const at::Tensor ref_logits = ref.at("logits").to(at::kFloat).contiguous();
    const auto n_prompt = static_cast<int32_t>(prompt.size());

    test::Session alone(model.handle), batch(model.handle, 2);
    std::vector<float> logits(static_cast<size_t>(2 * vocab));
    REQUIRE(gpt_session_prefill(alone.handle, prompt.data(), n_prompt, logits.data()) == GPT_OK);
    CHECK(gpt_session_decode(alone.handle, steps[0], logits.data()) == GPT_ERR_INTERNAL);
    CHECK(test::position_of(alone.handle, 0) == n_prompt);

    for (int32_t s = 0; s < 2; ++s)
        REQUIRE(gpt_session_prefill_seq(batch.handle, s, prompt.data(), n_prompt, logits.data() + s * vocab) == GPT_OK);
    const gpt_token only_first[] = {steps[0], GPT_TOKEN_NONE};  // one row: decode_one
    CHECK(gpt_session_decode_batch(batch.handle, only_first, logits.data()) == GPT_ERR_INTERNAL);
    const gpt_token both[] = {steps[0], steps[0]};  // two rows: the batched graph, which is intact
    REQUIRE(gpt_session_decode_batch(batch.handle, both, logits.data()) == GPT_OK);
    for (int32_t s = 0; s < 2; ++s)
        CHECK(test::max_abs_diff(logits.data() + s * vocab, ref_logits[1].data_ptr<float>(), vocab) < kTolerance);
    double err = 0;
    CHECK(gpt_model_verify(model.handle, &err) != GPT_OK);  // the golden check runs decode_one too
}

TEST_CASE("a decode step reads the KV cache only up to its span: NaN past it never reaches a logit",
          "[inference][batch]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const gpt::Model &m = *model.handle->impl;
    const int64_t block = m.config().block_size, span = 10;
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    for (const int64_t rows : {1, 3}) {  // decode_one, the batched decode
        CAPTURE(rows);
        const at::Tensor kv = m.new_kv_cache(rows);
        REQUIRE(kv.size(4) == block + 1);  // the spare position the graphs' views need
        const at::Tensor prompt = at::arange(1, 10, i64).expand({rows, 9}).contiguous();
        m.prefill(prompt, kv);
        const at::Tensor clean = kv.clone();
        kv.narrow(4, span, block + 1 - span).fill_(std::numeric_limits<float>::quiet_NaN());
        const at::Tensor pos = at::tensor(std::vector<int64_t>{9, 4, 6}).narrow(0, 0, rows).contiguous();
        const at::Tensor step = prompt.narrow(1, 0, 1).contiguous();
        const at::Tensor logits = m.decode(step, pos, kv, span);
        const at::Tensor expected = m.decode(step, pos, clean, block);  // the whole context, no NaN
        CHECK(logits.isfinite().all().item<bool>());
        CHECK((logits - expected).abs().max().item<float>() < kTolerance);
        CHECK((kv.narrow(4, 0, span) - clean.narrow(4, 0, span)).abs().max().item<float>() < kTolerance);
    }
}
