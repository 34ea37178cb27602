// Inference through the C ABI against eager PyTorch, determinism and threads.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

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

// No Catch2 assertions here: it also runs on worker threads.
std::vector<gpt_token> try_generate(gpt_model *model, const std::vector<gpt_token> &prompt, uint64_t seed, int n,
                                    gpt_status *status) {
    gpt_session *session = nullptr;
    if ((*status = gpt_session_create(model, &session)) != GPT_OK) return {};
    gpt_generate_params p = gpt_generate_default_params();
    p.max_new_tokens = n;
    p.seed = seed;
    p.temperature = 1.0f;
    p.top_k = 20;
    p.top_p = 0.95f;
    std::vector<gpt_token> out(static_cast<size_t>(n));
    int32_t count = 0;
    *status =
        gpt_session_generate(session, prompt.data(), static_cast<int32_t>(prompt.size()), &p, out.data(), n, &count);
    gpt_session_free(session);
    out.resize(*status == GPT_OK ? static_cast<size_t>(count) : 0);
    return out;
}

std::vector<gpt_token> generate(gpt_model *model, const std::vector<gpt_token> &prompt, uint64_t seed, int n = 20) {
    gpt_status status = GPT_OK;
    auto out = try_generate(model, prompt, seed, n, &status);
    REQUIRE(status == GPT_OK);
    return out;
}

}  // namespace

TEST_CASE("prefill and decode logits match eager PyTorch, each decode step a full recompute", "[inference]") {
    const auto ref = test::reference();
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const gpt_model_info &info = model.info;
    test::Session session(model.handle);

    const auto prompt = tokens_of(ref.at("prompt"));
    const auto steps = tokens_of(ref.at("decode_tokens"));
    const at::Tensor expected = ref.at("logits");  // (1 + steps, vocab), eager full recompute
    std::vector<float> logits(static_cast<size_t>(info.vocab_size));
    REQUIRE(gpt_session_prefill(session.handle, prompt.data(), static_cast<int32_t>(prompt.size()), logits.data()) ==
            GPT_OK);
    CHECK(max_abs_diff(logits, expected[0]) < kTolerance);
    for (size_t i = 0; i < steps.size(); ++i) {
        REQUIRE(gpt_session_decode(session.handle, steps[i], logits.data()) == GPT_OK);
        CHECK(max_abs_diff(logits, expected[static_cast<int64_t>(i) + 1]) < kTolerance);
    }
    int32_t position = 0;
    REQUIRE(gpt_session_position(session.handle, &position) == GPT_OK);
    CHECK(position == static_cast<int32_t>(prompt.size() + steps.size()));
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
    CHECK(std::string(gpt_last_error()).find("golden decode logits differ") != std::string::npos);
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
    gpt_generate_params p = gpt_generate_default_params();
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
    gpt_generate_params p = gpt_generate_default_params();
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
    gpt_generate_params p = gpt_generate_default_params();
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
        REQUIRE(gpt_session_position(manual.handle, &pos) == GPT_OK);
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
    gpt_generate_params p = gpt_generate_default_params();
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
    CHECK(count == -7);  // outputs untouched on failure
    CHECK(out[0] == -7);
}

TEST_CASE("16 threads with their own sessions give the sequential tokens", "[threads]") {
    constexpr size_t kThreads = 16, kRounds = 8;  // 128 concurrent generations against 16 sequential ones
    test::Model model(test::artifact("flash"), /*num_runners=*/4);
    REQUIRE(model.status == GPT_OK);
    std::vector<std::vector<gpt_token>> prompts, sequential;
    for (size_t i = 0; i < kThreads; ++i) {
        prompts.push_back({static_cast<gpt_token>(1 + 4 * i), static_cast<gpt_token>(2 + 3 * i)});
        sequential.push_back(generate(model.handle, prompts[i], 100 + i, 24));
    }

    std::vector<std::vector<std::vector<gpt_token>>> parallel(kThreads);
    std::vector<gpt_status> statuses(kThreads * kRounds, GPT_ERR_INTERNAL);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < kThreads; ++i)
        threads.emplace_back([&, i] {
            for (size_t r = 0; r < kRounds; ++r)  // repeated so the threads overlap for real
                parallel[i].push_back(try_generate(model.handle, prompts[i], 100 + i, 24, &statuses[i * kRounds + r]));
        });
    for (auto &t : threads) t.join();
    size_t ok = 0, equal = 0;
    for (gpt_status s : statuses) ok += s == GPT_OK;
    for (size_t i = 0; i < kThreads; ++i)
        for (const auto &run : parallel[i]) equal += run == sequential[i];
    CHECK(ok == kThreads * kRounds);
    CHECK(equal == kThreads * kRounds);
}

TEST_CASE("sessions created and destroyed from 16 threads at once; the model outlives them", "[threads]") {
    constexpr int kThreads = 16, kCycles = 50;  // 800 create/prefill/free cycles
    test::Model model(test::artifact("flash"), /*num_runners=*/4);
    REQUIRE(model.status == GPT_OK);
    const std::vector<gpt_token> prompt = {40, 69, 2};
    std::vector<float> expected(static_cast<size_t>(model.info.vocab_size));
    {
        test::Session s(model.handle);
        REQUIRE(gpt_session_prefill(s.handle, prompt.data(), 3, expected.data()) == GPT_OK);
    }
    // A session held across the whole run: the model must refuse to be freed while it lives.
    gpt_session *held = nullptr;
    REQUIRE(gpt_session_create(model.handle, &held) == GPT_OK);

    std::atomic<int> failures{0}, mismatches{0}, busy_refusals{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            std::vector<float> logits(expected.size());
            for (int c = 0; c < kCycles; ++c) {
                gpt_session *session = nullptr;
                if (gpt_session_create(model.handle, &session) != GPT_OK) {
                    ++failures;
                    continue;
                }
                if (gpt_session_prefill(session, prompt.data(), 3, logits.data()) != GPT_OK) ++failures;
                for (size_t i = 0; i < logits.size(); ++i)  // parallel kernels may sum in another order
                    if (std::abs(logits[i] - expected[i]) > 1e-5f) {
                        ++mismatches;
                        break;
                    }
                gpt_session_free(session);
                if (gpt_model_free(model.handle) == GPT_ERR_BUSY) ++busy_refusals;  // `held` is still alive
            }
        });
    for (auto &t : threads) t.join();
    CHECK(failures == 0);
    CHECK(mismatches == 0);
    CHECK(busy_refusals == kThreads * kCycles);
    gpt_session_free(held);
    CHECK(gpt_model_free(model.handle) == GPT_OK);  // the last session is gone
    model.handle = nullptr;
}
