// gpt_session_decode_sample_batch: a step and its sampling in one call, against the two calls it
// replaces (gpt_session_decode_batch, then gpt_sampler_sample_batch on the same logits); the
// CUDA-graph switch; and, on a GPU, captured steps against plain ones and device sampling
// against the host sampler.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

struct Samplers {
    std::vector<gpt_sampler *> handles;
    Samplers(const std::vector<gpt_sampler_params> &settings) {
        for (const auto &p : settings) {
            gpt_sampler *s = nullptr;
            REQUIRE(gpt_sampler_create(&p, &s) == GPT_OK);
            handles.push_back(s);
        }
    }
    ~Samplers() {
        for (gpt_sampler *s : handles) gpt_sampler_free(s);
    }
};

gpt_sampler_params sampling(float temperature, int32_t top_k, float top_p, uint64_t seed) {
    gpt_sampler_params p;
    gpt_sampler_default_params(&p, sizeof p);
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.seed = seed;
    return p;
}

// Greedy, plain temperature, top-k, top-p: one setting per sequence (the first n_seq of them).
std::vector<gpt_sampler_params> mixed_settings(int32_t n_seq) {
    std::vector<gpt_sampler_params> all = {sampling(0.0f, 0, 1.0f, 1), sampling(1.0f, 0, 1.0f, 2),
                                           sampling(0.8f, 5, 1.0f, 3), sampling(1.2f, 0, 0.9f, 4)};
    all.resize(static_cast<size_t>(n_seq));
    return all;
}

float max_abs_diff(const std::vector<float> &a, const std::vector<float> &b) {
    float worst = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
}

// Prefills sequence i of `session` with a prompt of i + 2 tokens of its own.
void prefill_all(gpt_session *session, int32_t n_seq, int32_t vocab, std::vector<float> &logits) {
    for (int32_t seq = 0; seq < n_seq; ++seq) {
        std::vector<gpt_token> prompt;
        for (int32_t i = 0; i < seq + 2; ++i) prompt.push_back((seq * 13 + i * 5 + 1) % vocab);
        REQUIRE(gpt_session_prefill_seq(session, seq, prompt.data(), static_cast<int32_t>(prompt.size()),
                                        logits.data() + static_cast<size_t>(seq) * static_cast<size_t>(vocab)) ==
                GPT_OK);
    }
}

// Steps `steps` times two sessions of n_seq (<= 4) sequences of `model` from the same prompts: one with
// decode_sample_batch, the other with decode_batch and then the host samplers over its logits. Sequence 2
// (if any) sits out every third step.
// Returns the largest logits difference seen; requires the same tokens at every step.
float compare_with_two_calls(gpt_model *model, int32_t vocab, int steps, int32_t n_seq = 4) {
    test::Session fused(model, n_seq), split(model, n_seq);
    std::vector<float> fused_logits(static_cast<size_t>(n_seq * vocab)), split_logits(fused_logits.size());
    prefill_all(fused.handle, n_seq, vocab, fused_logits);
    prefill_all(split.handle, n_seq, vocab, split_logits);
    Samplers fused_samplers(mixed_settings(n_seq)), split_samplers(mixed_settings(n_seq));
    std::vector<gpt_token> next(n_seq);
    REQUIRE(gpt_sampler_sample_batch(split_samplers.handles.data(), n_seq, split_logits.data(), vocab, next.data(), 0,
                                     nullptr) == GPT_OK);
    std::vector<gpt_token> check(n_seq);
    REQUIRE(gpt_sampler_sample_batch(fused_samplers.handles.data(), n_seq, fused_logits.data(), vocab, check.data(), 0,
                                     nullptr) == GPT_OK);
    REQUIRE(check == next);
    float worst = 0.0f;
    for (int step = 0; step < steps; ++step) {
        std::vector<gpt_token> tokens = next;
        if (step % 3 == 2 && n_seq > 2) tokens[2] = GPT_TOKEN_NONE;
        std::vector<gpt_token> fused_out(n_seq, 12345), split_out(n_seq);
        REQUIRE(gpt_session_decode_sample_batch(fused.handle, tokens.data(), fused_samplers.handles.data(),
                                                fused_out.data(), fused_logits.data()) == GPT_OK);
        REQUIRE(gpt_session_decode_batch(split.handle, tokens.data(), split_logits.data()) == GPT_OK);
        std::vector<gpt_sampler *> stepping = split_samplers.handles;
        for (int32_t seq = 0; seq < n_seq; ++seq)
            if (tokens[static_cast<size_t>(seq)] == GPT_TOKEN_NONE) stepping[static_cast<size_t>(seq)] = nullptr;
        REQUIRE(gpt_sampler_sample_batch(stepping.data(), n_seq, split_logits.data(), vocab, split_out.data(), 0,
                                         nullptr) == GPT_OK);
        INFO("step " << step);
        CHECK(fused_out == split_out);
        if (step % 3 == 2 && n_seq > 2) CHECK(fused_out[2] == GPT_TOKEN_NONE);
        worst = std::max(worst, max_abs_diff(fused_logits, split_logits));
        for (int32_t seq = 0; seq < n_seq; ++seq)
            if (fused_out[static_cast<size_t>(seq)] != GPT_TOKEN_NONE)
                next[static_cast<size_t>(seq)] = fused_out[static_cast<size_t>(seq)];
    }
    return worst;
}

}  // namespace

TEST_CASE("decode_sample_batch draws what decode_batch and the samplers draw, step after step",
          "[inference][sampling]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    for (const int32_t n_seq : {1, 3, 4})  // the same graph on the same inputs: the same logits, bit for bit
        CHECK(compare_with_two_calls(model.handle, model.info.vocab_size, 12, n_seq) == 0.0f);
}

TEST_CASE("decode_sample_batch refuses a stepping sequence without a sampler and changes nothing", "[sampling]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const int32_t vocab = model.info.vocab_size;
    test::Session session(model.handle, 2);
    std::vector<float> logits(static_cast<size_t>(2 * vocab));
    prefill_all(session.handle, 2, vocab, logits);
    Samplers samplers({sampling(1.0f, 0, 1.0f, 1)});
    gpt_sampler *rows[2] = {samplers.handles[0], nullptr};
    const gpt_token both[2] = {1, 2};
    gpt_token out[2] = {0, 0};
    CHECK(gpt_session_decode_sample_batch(session.handle, both, rows, out, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(std::string(gpt_runtime_last_error()).find("sequence 1: a sequence that steps needs a sampler") !=
          std::string::npos);
    int32_t position = -1;
    REQUIRE(gpt_session_get_position_seq(session.handle, 1, &position) == GPT_OK);
    CHECK(position == 3);  // its prompt only
    // Sitting out needs no sampler.
    const gpt_token first_only[2] = {1, GPT_TOKEN_NONE};
    CHECK(gpt_session_decode_sample_batch(session.handle, first_only, rows, out, nullptr) == GPT_OK);
    CHECK(out[1] == GPT_TOKEN_NONE);
    CHECK(out[0] >= 0);
    CHECK(out[0] < vocab);
    CHECK(gpt_session_decode_sample_batch(session.handle, first_only, nullptr, out, nullptr) ==
          GPT_ERR_INVALID_ARGUMENT);
    // One sampler for two sequences: each needs its own random stream.
    gpt_sampler *shared[2] = {samplers.handles[0], samplers.handles[0]};
    CHECK(gpt_session_decode_sample_batch(session.handle, both, shared, out, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(std::string(gpt_runtime_last_error()).find("has the sampler of sequence 0") != std::string::npos);
    REQUIRE(gpt_session_get_position_seq(session.handle, 1, &position) == GPT_OK);
    CHECK(position == 3);
    CHECK(gpt_session_decode_sample_batch(session.handle, first_only, rows, nullptr, nullptr) ==
          GPT_ERR_INVALID_ARGUMENT);
}

TEST_CASE("model flags: an unknown bit is refused, the CUDA-graph switch loads anywhere", "[sampling][abi]") {
    gpt_model_params params;
    gpt_model_default_params(&params, sizeof params);
    CHECK(params.flags == 0);
    params.flags = uint64_t{1} << 7;
    gpt_model *model = nullptr;
    CHECK(gpt_model_load(test::artifact("flash").c_str(), &params, &model) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(model == nullptr);
    CHECK(std::string(gpt_runtime_last_error()).find("flags holds a bit this library does not know") !=
          std::string::npos);
    test::Model plain(test::artifact("flash"), 1, 0, GPT_MODEL_NO_CUDA_GRAPHS);  // a CPU model has none to turn off
    CHECK(plain.status == GPT_OK);
}

TEST_CASE("on the GPU, CUDA-graph decode gives the plain steps' logits and tokens, and device sampling the host's",
          "[inference][sampling][cuda]") {
    std::filesystem::path dir;
    if (!test::have_cuda_artifact(&dir)) return;
    test::Model captured(dir), plain(dir, 1, 0, GPT_MODEL_NO_CUDA_GRAPHS);
    REQUIRE(captured.status == GPT_OK);
    REQUIRE(plain.status == GPT_OK);
    const int32_t vocab = captured.info.vocab_size;
    // Each model against the two-call path on itself: the samplers draw the same tokens on the device
    // as on the host from the same logits (the fused call's logits are the ones it sampled).
    const int steps = std::min(40, captured.info.block_size - 8);  // across several captured spans
    for (const int32_t n_seq : {1, 3, 4}) {                        // odd widths too: the captured inputs' alignment
        CHECK(compare_with_two_calls(captured.handle, vocab, steps, n_seq) < 1e-5f);
        CHECK(compare_with_two_calls(plain.handle, vocab, steps, n_seq) < 1e-5f);
    }
    // Captured against plain: greedy generation token for token, and the logits of each step.
    const std::vector<gpt_token> prompt = {1, 5, 9, 2};
    gpt_generate_params params = test::default_generate_params();
    params.temperature = 0.0f;
    params.max_new_tokens = steps;
    params.stop_at_eos = false;
    std::vector<gpt_token> a(static_cast<size_t>(steps)), b(a.size());
    int32_t na = 0, nb = 0;
    test::Session sa(captured.handle), sb(plain.handle);
    REQUIRE(gpt_session_generate(sa.handle, prompt.data(), 4, &params, a.data(), steps, &na) == GPT_OK);
    REQUIRE(gpt_session_generate(sb.handle, prompt.data(), 4, &params, b.data(), steps, &nb) == GPT_OK);
    CHECK(na == steps);
    CHECK(a == b);
    std::vector<float> la(static_cast<size_t>(vocab)), lb(la.size());
    test::Session ca(captured.handle), cb(plain.handle);
    REQUIRE(gpt_session_prefill(ca.handle, prompt.data(), 4, la.data()) == GPT_OK);
    REQUIRE(gpt_session_prefill(cb.handle, prompt.data(), 4, lb.data()) == GPT_OK);
    float worst = 0.0f;
    for (int step = 0; step < steps; ++step) {
        const gpt_token token = a[static_cast<size_t>(step)];
        REQUIRE(gpt_session_decode(ca.handle, token, la.data()) == GPT_OK);
        REQUIRE(gpt_session_decode(cb.handle, token, lb.data()) == GPT_OK);
        worst = std::max(worst, max_abs_diff(la, lb));
    }
    CHECK(worst < 1e-4f);  // fp32: the same kernels, a longer masked span at most
}
