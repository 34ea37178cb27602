// gpt_session_decode_sample_batch: a step and its sampling in one call, against the two calls it
// replaces (gpt_session_decode_batch, then gpt_sampler_sample_batch on the same logits); the
// CUDA-graph switch; and, on a GPU, captured steps against plain ones and device sampling
// against the host sampler.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
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

namespace {

// has_text[id]: whether a model's id has text. The tiny char models' 96 ids, of which keep_text_of_first
// leaves text to the first 80, or tiny-bpe's 1024 with gaps.
using HasText = std::vector<bool>;
constexpr int32_t kWithText = 80;

// The tokens of `tokens` that have no text (none, when the test passes).
std::vector<gpt_token> without_text(const std::vector<gpt_token> &tokens, const HasText &has_text) {
    std::vector<gpt_token> out;
    std::copy_if(tokens.begin(), tokens.end(), std::back_inserter(out), [&](gpt_token t) {
        return t < 0 || static_cast<size_t>(t) >= has_text.size() || !has_text[static_cast<size_t>(t)];
    });
    return out;
}

constexpr int32_t kGreedyPrompts = 128;  // generated()'s greedy runs: from the first ids

// Generation (its prefill and its decode steps sampled where the logits are): greedy from each of the
// first kGreedyPrompts single-token prompts, and sampled hot under several settings and seeds. Returns
// every token it drew.
std::vector<gpt_token> generated(gpt_model *model, int32_t vocab) {
    std::vector<gpt_token> all;
    gpt_generate_params params = test::default_generate_params();
    params.stop_at_eos = false;
    const auto run = [&](gpt_token first, int32_t n) {
        std::vector<gpt_token> out(static_cast<size_t>(n));
        int32_t count = 0;
        test::Session session(model);
        params.max_new_tokens = n;
        REQUIRE(gpt_session_generate(session.handle, &first, 1, &params, out.data(), n, &count) == GPT_OK);
        all.insert(all.end(), out.begin(), out.begin() + count);
    };
    params.temperature = 0.0f;
    for (gpt_token first = 0; first < std::min(vocab, kGreedyPrompts); ++first) run(first, 3);
    for (const gpt_sampler_params &s :
         {sampling(1.5f, 0, 1.0f, 0), sampling(2.0f, 50, 1.0f, 0), sampling(1.5f, 0, 0.99f, 0)})
        for (uint64_t seed = 0; seed < 4; ++seed) {
            params.temperature = s.temperature;
            params.top_k = s.top_k;
            params.top_p = s.top_p;
            params.seed = seed;
            run(static_cast<gpt_token>(seed * 7 % static_cast<uint64_t>(vocab)), 24);
        }
    return all;
}

// What every path of `model` gives: logits, generated tokens, steps sampled in one call, and each
// row's top log-probabilities; none holds or names an id without text.
void check_no_id_without_text(gpt_model *model, const HasText &has_text) {
    const auto vocab = static_cast<int32_t>(has_text.size());
    std::vector<float> logits(static_cast<size_t>(vocab));
    test::Session session(model);
    const gpt_token prompt[3] = {1, 2, 3};
    REQUIRE(gpt_session_prefill(session.handle, prompt, 3, logits.data()) == GPT_OK);
    for (const bool decoded : {false, true}) {
        if (decoded) REQUIRE(gpt_session_decode(session.handle, 4, logits.data()) == GPT_OK);
        INFO((decoded ? "decode" : "prefill") << " logits");
        for (int32_t id = 0; id < vocab; ++id) {
            INFO("id " << id);
            if (has_text[static_cast<size_t>(id)])
                CHECK(std::isfinite(logits[static_cast<size_t>(id)]));
            else
                CHECK(logits[static_cast<size_t>(id)] == -INFINITY);
        }
    }
    const std::vector<gpt_token> drawn = generated(model, vocab);
    CHECK(without_text(drawn, has_text) == std::vector<gpt_token>{});
    size_t size = 0;
    CHECK(gpt_model_detokenize(model, drawn.data(), static_cast<int32_t>(drawn.size()), nullptr, 0, &size) ==
          GPT_ERR_BUFFER_TOO_SMALL);  // only asks the size: every token has text
    // Steps sampled in one call, and the same logits through the samplers with 20 top log-probabilities.
    const int32_t n_seq = 4, n_top = GPT_MAX_TOP_LOGPROBS;
    test::Session batch(model, n_seq);
    std::vector<float> rows(static_cast<size_t>(n_seq * vocab));
    prefill_all(batch.handle, n_seq, vocab, rows);
    const std::vector<gpt_sampler_params> hot = {sampling(0.0f, 0, 1.0f, 1), sampling(1.5f, 0, 1.0f, 2),
                                                 sampling(2.0f, 40, 1.0f, 3), sampling(1.5f, 0, 0.99f, 4)};
    Samplers fused(hot), listing(hot);
    std::vector<gpt_token> step_tokens = {1, 2, 3, 4}, next(static_cast<size_t>(n_seq)), tokens;
    std::vector<gpt_token> listed(static_cast<size_t>(n_seq));
    std::vector<gpt_token_logprob> top(static_cast<size_t>(n_seq * (1 + n_top)));
    for (int step = 0; step < 16; ++step) {
        REQUIRE(gpt_session_decode_sample_batch(batch.handle, step_tokens.data(), fused.handles.data(), next.data(),
                                                rows.data()) == GPT_OK);
        tokens.insert(tokens.end(), next.begin(), next.end());
        step_tokens = next;
        REQUIRE(gpt_sampler_sample_batch(listing.handles.data(), n_seq, rows.data(), vocab, listed.data(), n_top,
                                         top.data()) == GPT_OK);
        tokens.insert(tokens.end(), listed.begin(), listed.end());
        for (const gpt_token_logprob &entry : top) tokens.push_back(entry.token);  // 20, all with text
    }
    CHECK(without_text(tokens, has_text) == std::vector<gpt_token>{});
}

// The char model's ids: text for the first kWithText.
HasText first_with_text(int32_t vocab) {
    HasText has_text(static_cast<size_t>(vocab), false);
    std::fill(has_text.begin(), has_text.begin() + kWithText, true);
    return has_text;
}

}  // namespace

TEST_CASE("ids without text (vocabulary padding) are never sampled nor listed among the most likely",
          "[inference][sampling]") {
    test::ScratchArtifact artifact(test::artifact("flash"));
    test::keep_text_of_first(artifact, kWithText);
    test::Model model(artifact.dir());
    REQUIRE(model.status == GPT_OK);
    REQUIRE(model.info.vocab_size == 96);
    check_no_id_without_text(model.handle, first_with_text(model.info.vocab_size));
    const gpt_token padding[1] = {kWithText};
    size_t size = 0;
    CHECK(gpt_model_detokenize(model.handle, padding, 1, nullptr, 0, &size) == GPT_ERR_OUT_OF_RANGE);
    CHECK(test::error_mentions("token id 80 has no text"));
}

TEST_CASE("gaps in a BPE's ids (as in cl100k_base) load, are never sampled nor listed, and have no text",
          "[bpe][sampling]") {
    // The gaps are ids tiny-bpe picks greedily after single-token prompts: unmasked, generation gives them.
    const std::filesystem::path source = test::artifact("bpe");
    std::vector<gpt_token> gaps;
    {
        test::Model original(source);
        REQUIRE(original.status == GPT_OK);
        gpt_generate_params params = test::default_generate_params();
        params.temperature = 0.0f;
        params.max_new_tokens = 3;
        params.stop_at_eos = false;
        for (gpt_token first = 0; first < kGreedyPrompts && gaps.size() < 8; ++first) {  // as generated() runs
            test::Session session(original.handle);
            gpt_token out[3];
            int32_t count = 0;
            REQUIRE(gpt_session_generate(session.handle, &first, 1, &params, out, 3, &count) == GPT_OK);
            for (int32_t i = 0; i < count; ++i)  // ordinary multi-byte tokens only: not the 256 bytes, not EOS
                if (out[i] >= 256 && out[i] != original.info.eos_token &&
                    std::find(gaps.begin(), gaps.end(), out[i]) == gaps.end() && gaps.size() < 8)
                    gaps.push_back(out[i]);
        }
    }
    REQUIRE(gaps.size() >= 4);
    test::ScratchArtifact artifact(source);
    nlohmann::json tokenizer;
    std::ifstream(artifact.file("tokenizer.json")) >> tokenizer;
    for (const gpt_token gap : gaps) tokenizer["vocab"][static_cast<size_t>(gap)] = nullptr;
    std::ofstream(artifact.file("tokenizer.json")) << tokenizer.dump();
    artifact.rehash("tokenizer.json");
    test::Model model(artifact.dir());
    REQUIRE(model.status == GPT_OK);
    HasText has_text(static_cast<size_t>(model.info.vocab_size), true);
    for (const gpt_token gap : gaps) has_text[static_cast<size_t>(gap)] = false;
    check_no_id_without_text(model.handle, has_text);
    size_t size = 0;
    CHECK(gpt_model_detokenize(model.handle, &gaps[0], 1, nullptr, 0, &size) == GPT_ERR_OUT_OF_RANGE);
    CHECK(test::error_mentions("has no text (a gap in the tokenizer's ids"));
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

TEST_CASE("on the GPU, captured decode steps and device sampling never choose an id without text",
          "[inference][sampling][cuda]") {
    std::filesystem::path dir;
    if (!test::have_cuda_artifact(&dir)) return;
    test::ScratchArtifact artifact(dir);
    test::keep_text_of_first(artifact, kWithText);
    for (const uint64_t flags : {uint64_t{0}, uint64_t{GPT_MODEL_NO_CUDA_GRAPHS}}) {  // the greedy choice in the graph
        test::Model model(artifact.dir(), 1, 0, flags);
        REQUIRE(model.status == GPT_OK);
        check_no_id_without_text(model.handle, first_with_text(model.info.vocab_size));
    }
}
