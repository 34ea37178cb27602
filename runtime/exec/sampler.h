// sampler.h — next-token choice from logits: greedy, temperature, top-k, top-p.
// Deterministic for a seed: the same logits and seed give the same tokens on every platform.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gpt_runtime.h"

namespace gpt {

class Sampler {
public:
    Sampler(float temperature, int32_t top_k, float top_p, uint64_t seed);
    // Logits may be -inf (a token ruled out); NaN, +inf or all -inf throw GPT_ERR_NON_FINITE.
    gpt_token sample(const float *logits, int32_t vocab_size);

private:
    double uniform();  // [0, 1), from the raw 64-bit engine so no library distribution varies it

    float temperature_;
    int32_t top_k_;
    float top_p_;
    std::mt19937_64 rng_;
    std::vector<std::pair<float, gpt_token>> candidates_;  // (value, id), reused across calls
};

}  // namespace gpt
