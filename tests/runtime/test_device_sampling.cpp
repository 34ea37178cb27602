// Sampling where the logits are (device_sampling.h) against the host Sampler: the same tokens for
// the same settings, seeds and logits, row by row and step after step, and a refused step that
// moves no sampler's stream. On the CPU the tensor path runs on CPU tensors; [cuda] on the GPU.
#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/stack.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>
#include <random>
#include <vector>

#include "base/error.h"
#include "exec/device_sampling.h"
#include "exec/model.h"
#include "exec/sampler.h"
#include "test_support.h"

namespace {

struct Settings {
    float temperature;
    int32_t top_k;
    float top_p;
};

// Logits with what makes sampling hard: ties (values on a coarse grid), tokens ruled out (-inf),
// a sharp or a flat distribution.
at::Tensor hard_logits(int64_t rows, int64_t vocab, std::mt19937 &rng) {
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    at::Tensor l = at::empty({rows, vocab}, at::kFloat);
    float *p = l.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float spread = unit(rng) < 0.5f ? 1.0f : 12.0f;
        for (int64_t i = 0; i < vocab; ++i) {
            float v = std::round(unit(rng) * spread * 8.0f) / 8.0f;  // many equal values
            if (unit(rng) < 0.05f) v = -INFINITY;
            p[r * vocab + i] = v;
        }
        p[r * vocab + static_cast<int64_t>(unit(rng) * static_cast<float>(vocab - 1))] = spread;  // never all -inf
    }
    return l;
}

std::vector<Settings> settings_grid(int32_t vocab) {
    std::vector<Settings> grid;
    for (const float t : {0.0f, 0.3f, 1.0f, 1.7f})
        for (const int32_t k : {0, 1, 5, vocab - 1, vocab, vocab + 3})
            for (const float p : {1.0f, 0.9f, 0.5f, 1e-6f}) grid.push_back({t, k, p});
    return grid;
}

// A logit bias on a few tokens and penalties, different for each row (none for some).
gpt::LogitAdjustments adjustments_for(size_t row, int64_t vocab) {
    gpt::LogitAdjustments a;
    if (row % 3 == 0) return a;
    a.bias = {{static_cast<gpt_token>(row % vocab), 1.5f}, {static_cast<gpt_token>((row * 7 + 1) % vocab), -3.0f}};
    if (a.bias[0].first == a.bias[1].first) a.bias.pop_back();
    a.presence = 0.25f * static_cast<float>(row % 4);
    a.frequency = row % 2 == 0 ? 0.5f : 0.0f;
    return a;
}

// Steps every row `steps` times with both paths, each from its own sampler of the same seed; with `adjust`,
// each sampler also has adjustments_for its row (the penalties then depend on what each path drew before).
void check_same_tokens(const c10::Device device, int64_t vocab, uint32_t seed, bool adjust = false) {
    std::mt19937 rng(seed);
    const auto grid = settings_grid(static_cast<int32_t>(vocab));
    const auto rows = static_cast<int64_t>(grid.size()) + 1;  // and one row without a sampler
    std::vector<std::unique_ptr<gpt::Sampler>> host, dev;
    for (size_t i = 0; i < grid.size(); ++i) {
        const gpt::LogitAdjustments a = adjust ? adjustments_for(i, vocab) : gpt::LogitAdjustments{};
        host.push_back(std::make_unique<gpt::Sampler>(grid[i].temperature, grid[i].top_k, grid[i].top_p, seed + i, a));
        dev.push_back(std::make_unique<gpt::Sampler>(grid[i].temperature, grid[i].top_k, grid[i].top_p, seed + i, a));
    }
    std::vector<gpt::Sampler *> dev_rows;
    for (auto &s : dev) dev_rows.push_back(s.get());
    dev_rows.push_back(nullptr);
    int64_t compared = 0;
    for (int step = 0; step < 6; ++step) {
        const at::Tensor logits = hard_logits(rows, vocab, rng);
        // Padded past the vocabulary with junk, as the graphs' logits are (padded_vocab columns).
        const at::Tensor padded = at::cat({logits, at::full({rows, 7}, 1e9f)}, 1).to(device);
        const gpt::SampledRows sampled = gpt::sample_on_device(padded, static_cast<int32_t>(vocab), dev_rows);
        CHECK(sampled.refused.empty());
        const std::vector<gpt_token> &tokens = sampled.tokens;
        REQUIRE(tokens.size() == static_cast<size_t>(rows));
        CHECK(tokens.back() == GPT_TOKEN_NONE);
        for (size_t i = 0; i < grid.size(); ++i) {
            const gpt_token expected =
                host[i]->sample(logits[static_cast<int64_t>(i)].data_ptr<float>(), static_cast<int32_t>(vocab));
            INFO("vocab " << vocab << " step " << step << " row " << i << ": temperature " << grid[i].temperature
                          << " top_k " << grid[i].top_k << " top_p " << grid[i].top_p);
            CHECK(tokens[i] == expected);
            ++compared;
        }
    }
    CHECK(compared == 6 * static_cast<int64_t>(grid.size()));
}

void check_refusal_keeps_streams(const c10::Device device) {
    const int64_t vocab = 50;
    std::mt19937 rng(5);
    const at::Tensor good = hard_logits(2, vocab, rng);
    gpt::Sampler a(1.0f, 0, 1.0f, 3), b(0.8f, 10, 0.9f, 4), fresh_a(1.0f, 0, 1.0f, 3), fresh_b(0.8f, 10, 0.9f, 4);
    for (const float poison : {NAN, INFINITY, -INFINITY}) {
        at::Tensor bad = good.clone();
        if (poison == -INFINITY)
            bad[1].fill_(poison);  // every token ruled out
        else
            bad[1][17] = poison;
        const gpt::SampledRows sampled = gpt::sample_on_device(bad.to(device), static_cast<int32_t>(vocab), {&a, &b});
        CHECK(sampled.refused == std::vector<int32_t>{1});
        CHECK(sampled.tokens[1] == GPT_TOKEN_NONE);
        // Row 0 is drawn as ever: a refused row takes nothing from the others.
        CHECK(sampled.tokens[0] == fresh_a.sample(good[0].data_ptr<float>(), static_cast<int32_t>(vocab)));
    }
    // b never drew: it goes on exactly as a fresh sampler.
    const auto sampled = gpt::sample_on_device(good.to(device), static_cast<int32_t>(vocab), {nullptr, &b});
    CHECK(sampled.refused.empty());
    CHECK(sampled.tokens[0] == GPT_TOKEN_NONE);
    CHECK(sampled.tokens[1] == fresh_b.sample(good[1].data_ptr<float>(), static_cast<int32_t>(vocab)));
}

}  // namespace

TEST_CASE("tensor sampling draws the host sampler's tokens for every setting", "[sampler][device_sampling]") {
    for (const int64_t vocab : {2, 3, 17, 300}) check_same_tokens(c10::Device(c10::kCPU), vocab, 100 + vocab);
}

TEST_CASE("tensor sampling matches the host sampler over a GPT-2 sized vocabulary", "[sampler][device_sampling]") {
    check_same_tokens(c10::Device(c10::kCPU), 50257, 7);
}

TEST_CASE("tensor sampling adds each sampler's logit bias and penalties as the host does",
          "[sampler][device_sampling]") {
    for (const int64_t vocab : {3, 17, 300}) check_same_tokens(c10::Device(c10::kCPU), vocab, 300 + vocab, true);
    check_same_tokens(c10::Device(c10::kCPU), 50257, 8, true);
    // A bias outside the vocabulary refuses the step before any sampler draws.
    gpt::Sampler in(1.0f, 0, 1.0f, 1, {{{2, 1.0f}}, 0.5f, 0.0f}), out(1.0f, 0, 1.0f, 1, {{{40, 1.0f}}, 0.0f, 0.0f});
    gpt::Sampler fresh(1.0f, 0, 1.0f, 1, {{{2, 1.0f}}, 0.5f, 0.0f});
    std::mt19937 rng(3);
    const at::Tensor logits = hard_logits(2, 40, rng);
    CHECK_THROWS_AS(gpt::sample_on_device(logits, 40, {&in, &out}), gpt::Error);
    for (int step = 0; step < 3; ++step)
        CHECK(gpt::sample_on_device(logits, 40, {&in, nullptr}).tokens[0] ==
              fresh.sample(logits[0].data_ptr<float>(), 40));
}

TEST_CASE("bf16 logits sample as the host sampler samples their float values", "[sampler][device_sampling]") {
    std::mt19937 rng(9);
    const at::Tensor logits = hard_logits(4, 64, rng).to(at::kBFloat16);
    const at::Tensor as_float = logits.to(at::kFloat);
    std::vector<gpt::Sampler> host, dev;
    for (uint64_t seed = 0; seed < 4; ++seed) {
        host.emplace_back(0.9f, 0, 0.95f, seed);
        dev.emplace_back(0.9f, 0, 0.95f, seed);
    }
    const auto tokens = gpt::sample_on_device(logits, 64, {&dev[0], &dev[1], &dev[2], &dev[3]}).tokens;
    for (int64_t r = 0; r < 4; ++r)
        CHECK(tokens[static_cast<size_t>(r)] == host[static_cast<size_t>(r)].sample(as_float[r].data_ptr<float>(), 64));
}

TEST_CASE("a row of non-finite logits is refused alone, its sampler's stream untouched", "[sampler][device_sampling]") {
    check_refusal_keeps_streams(c10::Device(c10::kCPU));
}

TEST_CASE("on the GPU, sampling draws the host sampler's tokens (bias and penalties too) and refuses non-finite rows",
          "[sampler][device_sampling][cuda]") {
    if (!at::hasCUDA()) {
        WARN("skipped: no CUDA device");
        return;
    }
    for (const int64_t vocab : {3, 300, 50257}) check_same_tokens(c10::Device(c10::kCUDA, 0), vocab, 200 + vocab);
    check_same_tokens(c10::Device(c10::kCUDA, 0), 300, 500, true);
    check_same_tokens(c10::Device(c10::kCUDA, 0), 50257, 501, true);
    check_refusal_keeps_streams(c10::Device(c10::kCUDA, 0));
}

TEST_CASE("a step's own greedy choice is what an all-greedy step returns", "[sampler][device_sampling]") {
    std::mt19937 rng(11);
    const at::Tensor logits = hard_logits(3, 40, rng);
    gpt::Sampler g0(0.0f, 0, 1.0f, 1), g1(0.0f, 0, 1.0f, 2), h0(0.0f, 0, 1.0f, 1), h1(0.0f, 0, 1.0f, 2);
    const at::Tensor greedy = gpt::greedy_choice(logits, 40);
    REQUIRE(greedy.sizes() == at::IntArrayRef({2, 3}));
    const auto given = gpt::sample_on_device(logits, 40, {&g0, nullptr, &g1}, greedy);
    CHECK(given.tokens[0] == h0.sample(logits[0].data_ptr<float>(), 40));
    CHECK(given.tokens[1] == GPT_TOKEN_NONE);
    CHECK(given.tokens[2] == h1.sample(logits[2].data_ptr<float>(), 40));
    // The given choice is used as it is (a captured step's, computed in its graph), not computed again.
    at::Tensor other = greedy.clone();
    other[0][0] = 7;
    other[1][2] = 0;  // "row 2 cannot be drawn from"
    const auto used = gpt::sample_on_device(logits, 40, {&g0, nullptr, &g1}, other);
    CHECK(used.tokens[0] == 7);
    CHECK(used.refused == std::vector<int32_t>{2});
}

TEST_CASE("tensor sampling never draws an id without text from a model's logits", "[sampler][device_sampling]") {
    // A tiny model whose tokenizer has text for ids 0..79 of its 96: its logits there are the model's own
    // (random), and nothing but the model's mask keeps the tensor path from them.
    const int32_t with_text = 80;
    test::ScratchArtifact artifact(test::artifact("flash"));
    test::keep_text_of_first(artifact, with_text);
    gpt_model_params params;
    REQUIRE(gpt_model_default_params(&params, sizeof params) == GPT_OK);
    const gpt::Model model(artifact.dir(), params);
    const int32_t vocab = model.config().vocab_size;
    const int64_t rows = model.manifest().decode.max_batch;
    const auto grid = settings_grid(vocab);
    std::vector<std::unique_ptr<gpt::Sampler>> samplers;
    for (size_t i = 0; i < grid.size(); ++i)
        samplers.push_back(std::make_unique<gpt::Sampler>(grid[i].temperature, grid[i].top_k, grid[i].top_p, i));
    std::vector<gpt_token> chosen;
    for (int64_t batch = 0; batch * rows < vocab; ++batch) {  // a prompt starting with each id
        const at::Tensor first = at::arange(batch * rows, (batch + 1) * rows, at::kLong).remainder(vocab);
        const at::Tensor idx = at::stack({first, (first * 7 + 3).remainder(vocab)}, 1);  // (rows, 2)
        const at::Tensor logits = model.prefill(idx, model.new_kv_cache(rows));          // (rows, padded_vocab)
        const at::Tensor greedy = gpt::greedy_choice(logits, vocab);
        for (int64_t row = 0; row < rows; ++row)
            chosen.push_back(static_cast<gpt_token>(greedy[0][row].item<int64_t>()));
        for (size_t from = 0; from < grid.size(); from += static_cast<size_t>(rows)) {  // every setting, a row each
            std::vector<gpt::Sampler *> step(static_cast<size_t>(rows), nullptr);
            for (size_t row = 0; row < step.size() && from + row < grid.size(); ++row)
                step[row] = samplers[from + row].get();
            const gpt::SampledRows sampled = gpt::sample_on_device(logits, vocab, step);
            CHECK(sampled.refused.empty());
            for (size_t row = 0; row < step.size(); ++row)
                if (step[row] != nullptr) chosen.push_back(sampled.tokens[row]);
        }
    }
    std::vector<gpt_token> without_text;
    std::copy_if(chosen.begin(), chosen.end(), std::back_inserter(without_text),
                 [&](gpt_token t) { return t < 0 || t >= with_text; });
    CHECK(chosen.size() > 1000);
    CHECK(without_text == std::vector<gpt_token>{});
}
