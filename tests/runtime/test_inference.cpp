// Inference through the C ABI against eager PyTorch, and determinism.
#include <ATen/core/Tensor.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/full.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <vector>

#include "exec/model.h"
#include "test_support.h"

namespace {

// Compiled fp32 kernels differ from eager only by reduction order.
constexpr float kTolerance = 1e-4f;

std::vector<gpt_token> tokens_of(const at::Tensor &t) {
    const at::Tensor c = t.to(at::kInt).contiguous();
    return std::vector<gpt_token>(c.data_ptr<int32_t>(), c.data_ptr<int32_t>() + c.numel());
}

float max_abs_diff(const std::vector<float> &a, const at::Tensor &b) {
    REQUIRE(static_cast<int64_t>(a.size()) == b.numel());
    const at::Tensor c = b.to(at::kFloat).contiguous();
    float worst = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - c.data_ptr<float>()[i]));
    return worst;
}

std::vector<gpt_token> generate(gpt_model *model, const std::vector<gpt_token> &prompt, uint64_t seed, int n = 20) {
    gpt_status status = GPT_OK;
    auto out = test::try_generate(model, prompt, seed, n, &status);
    REQUIRE(status == GPT_OK);
    return out;
}

// Prefill, then each decode step, against the eager full recompute of reference.safetensors.
void check_logits_match_eager(const std::filesystem::path &artifact, float tolerance) {
    const auto ref = test::reference();
    test::Model model(artifact);
    REQUIRE(model.status == GPT_OK);
    const gpt_model_info &info = model.info;
    test::Session session(model.handle);

    const auto prompt = tokens_of(ref.at("prompt"));
    const auto steps = tokens_of(ref.at("decode_tokens"));
    const at::Tensor expected = ref.at("logits");  // (1 + steps, vocab), eager full recompute
    std::vector<float> logits(static_cast<size_t>(info.vocab_size));
    REQUIRE(gpt_session_prefill(session.handle, prompt.data(), static_cast<int32_t>(prompt.size()), logits.data()) ==
            GPT_OK);
    CHECK(max_abs_diff(logits, expected[0]) < tolerance);
    for (size_t i = 0; i < steps.size(); ++i) {
        REQUIRE(gpt_session_decode(session.handle, steps[i], logits.data()) == GPT_OK);
        CHECK(max_abs_diff(logits, expected[static_cast<int64_t>(i) + 1]) < tolerance);
    }
    int32_t position = 0;
    REQUIRE(gpt_session_get_position(session.handle, &position) == GPT_OK);
    CHECK(position == static_cast<int32_t>(prompt.size() + steps.size()));
}

}  // namespace

TEST_CASE("prefill and decode logits match eager PyTorch, each decode step a full recompute", "[inference]") {
    check_logits_match_eager(test::artifact("flash"), kTolerance);
}

TEST_CASE("a CUDA model's prefill and decode logits match eager PyTorch on the CPU", "[inference][cuda]") {
    std::filesystem::path dir;
    if (!test::have_cuda_artifact(&dir)) return;
    // Other kernels on another device, fp32 without TF32: reduction order only, over a few layers.
    check_logits_match_eager(dir, 1e-3f);
}

TEST_CASE("the golden vector verifies for every CPU attention kernel", "[inference]") {
    for (const char *kind : {"naive", "math", "flash"}) {
        test::Model model(test::artifact(kind));
        REQUIRE(model.status == GPT_OK);
        double err = -1.0;
        CHECK(gpt_model_verify(model.handle, &err) == GPT_OK);
        CHECK(err >= 0.0);
        CHECK(err < 1e-4);
        CHECK(std::string(model.info.attention) == kind);
    }
}

TEST_CASE("the model info names both kernels when decode's differs from the prefill's", "[inference]") {
    test::ScratchArtifact art(test::artifact("flash"));
    auto manifest = art.manifest();
    CHECK(manifest["attention"]["decode"]["backend"] == "flash");
    manifest["attention"]["decode"]["backend"] = "math";
    art.write_manifest(manifest);
    test::Model model(art.dir());
    REQUIRE(model.status == GPT_OK);
    CHECK(std::string(model.info.attention) == "prefill flash, decode math");
}

TEST_CASE("a golden vector that the model does not reproduce fails verify", "[inference]") {
    test::ScratchArtifact art(test::artifact("flash"));
    auto golden = test::read_safetensors(art.file("golden.safetensors"));
    golden.at("decode_logits").add_(0.5);
    test::write_safetensors(art.file("golden.safetensors"), golden);
    art.rehash("golden.safetensors");
    test::Model model(art.dir());
    REQUIRE(model.status == GPT_OK);
    double err = 0.0;
    CHECK(gpt_model_verify(model.handle, &err) == GPT_ERR_VERIFY_FAILED);
    CHECK(err == Approx(0.5).margin(1e-3));
    CHECK(std::string(gpt_runtime_last_error()).find("golden decode_one logits differ") != std::string::npos);
}

TEST_CASE("the same seed gives the same tokens and another seed does not", "[generate]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const std::vector<gpt_token> prompt = {40, 69, 76, 76, 79};
    const auto a = generate(model.handle, prompt, 42);
    const auto b = generate(model.handle, prompt, 42);
    const auto c = generate(model.handle, prompt, 43);
    CHECK(a.size() == 20);
    CHECK(a == b);
    CHECK(a != c);
}

TEST_CASE("greedy generation follows the argmax of the logits", "[generate]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const gpt_model_info &info = model.info;
    const std::vector<gpt_token> prompt = {40, 69, 76};

    test::Session session(model.handle);
    gpt_generate_params p = test::default_generate_params();
    p.max_new_tokens = 8;
    p.temperature = 0.0f;
    std::vector<gpt_token> out(8);
    int32_t count = 0;
    REQUIRE(gpt_session_generate(session.handle, prompt.data(), 3, &p, out.data(), 8, &count) == GPT_OK);
    REQUIRE(count == 8);

    test::Session manual(model.handle);
    std::vector<float> logits(static_cast<size_t>(info.vocab_size));
    REQUIRE(gpt_session_prefill(manual.handle, prompt.data(), 3, logits.data()) == GPT_OK);
    for (int i = 0; i < 8; ++i) {
        const auto next = static_cast<gpt_token>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        CHECK(out[static_cast<size_t>(i)] == next);
        if (i < 7) REQUIRE(gpt_session_decode(manual.handle, next, logits.data()) == GPT_OK);
    }
}

TEST_CASE("generation stops at the stop token", "[generate]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const std::vector<gpt_token> prompt = {40, 69, 76};
    const auto free_run = generate(model.handle, prompt, 7, 10);
    REQUIRE(free_run.size() == 10);

    test::Session session(model.handle);
    gpt_generate_params p = test::default_generate_params();
    p.max_new_tokens = 10;
    p.top_k = 20;
    p.top_p = 0.95f;
    p.seed = 7;
    p.stop_token = free_run[3];
    std::vector<gpt_token> out(10);
    int32_t count = 0;
    REQUIRE(gpt_session_generate(session.handle, prompt.data(), 3, &p, out.data(), 10, &count) == GPT_OK);
    const auto first_stop = std::find(free_run.begin(), free_run.end(), p.stop_token) - free_run.begin();
    CHECK(count == first_stop + 1);
}

TEST_CASE("past a full context, generation goes on from the last half window", "[generate]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const gpt_model_info &info = model.info;
    const int block = info.block_size;
    const std::vector<gpt_token> prompt = {40, 69, 76};
    const int n = 2 * block;

    test::Session session(model.handle);
    gpt_generate_params p = test::default_generate_params();
    p.max_new_tokens = n;
    p.temperature = 0.0f;
    std::vector<gpt_token> out(static_cast<size_t>(n));
    int32_t count = 0;
    REQUIRE(gpt_session_generate(session.handle, prompt.data(), 3, &p, out.data(), n, &count) == GPT_OK);
    REQUIRE(count == n);

    // The same by hand: greedy decode to a full context, then prefill the last block/2 tokens.
    std::vector<gpt_token> history = prompt;
    test::Session manual(model.handle);
    std::vector<float> logits(static_cast<size_t>(info.vocab_size));
    REQUIRE(gpt_session_prefill(manual.handle, prompt.data(), 3, logits.data()) == GPT_OK);
    for (int i = 0; i < n; ++i) {
        const auto next = static_cast<gpt_token>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        REQUIRE(out[static_cast<size_t>(i)] == next);
        history.push_back(next);
        int32_t pos = 0;
        REQUIRE(gpt_session_get_position(manual.handle, &pos) == GPT_OK);
        if (pos < block) {
            REQUIRE(gpt_session_decode(manual.handle, next, logits.data()) == GPT_OK);
        } else {
            REQUIRE(gpt_session_prefill(manual.handle, history.data() + history.size() - block / 2, block / 2,
                                        logits.data()) == GPT_OK);
        }
    }
}

TEST_CASE("a token callback streams every token and can cancel", "[generate]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    struct Seen {
        std::vector<gpt_token> tokens;
        size_t stop_after;
    } seen{{}, 4};
    test::Session session(model.handle);
    gpt_generate_params p = test::default_generate_params();
    p.max_new_tokens = 12;
    p.seed = 1;
    p.user_data = &seen;
    p.on_token = [](gpt_token t, void *user) {
        auto *s = static_cast<Seen *>(user);
        s->tokens.push_back(t);
        return s->tokens.size() < s->stop_after;
    };
    std::vector<gpt_token> out(12, -7);
    int32_t count = -7;
    const std::vector<gpt_token> prompt = {40, 69};
    CHECK(gpt_session_generate(session.handle, prompt.data(), 2, &p, out.data(), 12, &count) == GPT_ERR_ABORTED);
    CHECK(seen.tokens.size() == 4);
    CHECK(test::error_mentions("after 4 tokens"));
}

TEST_CASE("a generation cancelled by its callback still hands out the tokens generated so far", "[generate]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const std::vector<gpt_token> prompt = {40, 69};
    gpt_generate_params p = test::default_generate_params();
    p.max_new_tokens = 12;
    p.seed = 7;
    p.stop_at_eos = false;
    test::Session whole_session(model.handle);
    std::vector<gpt_token> whole(12);
    int32_t whole_count = 0;
    REQUIRE(gpt_session_generate(whole_session.handle, prompt.data(), 2, &p, whole.data(), 12, &whole_count) == GPT_OK);
    REQUIRE(whole_count == 12);

    int calls = 0;
    p.user_data = &calls;
    p.on_token = [](gpt_token, void *user) { return ++*static_cast<int *>(user) < 5; };
    test::Session session(model.handle);
    std::vector<gpt_token> out(12, -7);
    int32_t count = -7;
    CHECK(gpt_session_generate(session.handle, prompt.data(), 2, &p, out.data(), 12, &count) == GPT_ERR_ABORTED);
    CHECK(calls == 5);
    REQUIRE(count == 5);
    CHECK(std::vector<gpt_token>(out.begin(), out.begin() + 5) ==
          std::vector<gpt_token>(whole.begin(), whole.begin() + 5));
    CHECK(out[5] == -7);  // nothing past the count
}

TEST_CASE("onednn-form graphs read packed copies of the weights, repacked when the weights change", "[inference]") {
    test::Model model(test::artifact("math"));  // prefill and decode: onednn; decode_one: reduction
    REQUIRE(model.status == GPT_OK);
    gpt::Model &m = *model.handle->impl;
    REQUIRE(m.manifest().decode.linear == "onednn");
    REQUIRE(m.manifest().decode_one.linear == "reduction");
    const at::Tensor prompt = test::reference().at("prompt").to(at::kLong).view({1, -1});
    const int64_t n = prompt.size(1);
    const at::Tensor kv = m.new_kv_cache(2);
    m.prefill(prompt.expand({2, n}).contiguous(), kv);
    const at::Tensor token = prompt.narrow(1, n - 1, 1);
    // One decode step of row 0 as decode_one (plain weights) and as the batched decode (packed ones),
    // each on its own copy of the cache.
    auto decode_one = [&] {
        const at::Tensor one = m.new_kv_cache(1);
        one.copy_(kv.narrow(2, 0, 1));
        return m.decode(token, at::full({1}, n, at::kLong), one, n + 1);
    };
    auto decode_batched = [&] {
        return m.decode(token.expand({2, 1}).contiguous(), at::full({2}, n, at::kLong), kv.clone(), n + 1)
            .narrow(0, 0, 1);
    };
    CHECK(at::allclose(decode_batched(), decode_one(), kTolerance, kTolerance));

    m.weight("transformer.h.0.mlp.c_fc.weight").mul_(1.5);  // in place, as a training step changes it
    CHECK_FALSE(at::allclose(decode_batched(), decode_one(), kTolerance, kTolerance));  // packed copy: stale
    m.weights_changed();
    CHECK(at::allclose(decode_batched(), decode_one(), kTolerance, kTolerance));
}
