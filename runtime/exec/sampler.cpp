// sampler.cpp — softmax over the surviving candidates, then one uniform draw.
#include "exec/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"

namespace gpt {

namespace {

// Larger value first; equal values by smaller id, so the order never depends on the sort.
bool before(const std::pair<float, gpt_token> &a, const std::pair<float, gpt_token> &b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

Sampler::Sampler(float temperature, int32_t top_k, float top_p, uint64_t seed)
    : temperature_(temperature), top_k_(top_k), top_p_(top_p), rng_(seed) {}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

gpt_token Sampler::sample(const float *logits, int32_t vocab_size) {
    // -inf is a token ruled out; NaN or +inf is a model that overflowed, and nothing can be drawn from it.
    gpt_token argmax = 0;
    for (gpt_token i = 0; i < vocab_size; ++i) {
        if (std::isnan(logits[i]) || logits[i] == INFINITY)
            fail(GPT_ERR_NON_FINITE, "the model's logits hold " + std::to_string(logits[i]) + " at token " +
                                         std::to_string(i) + "; nothing can be sampled from them");
        if (logits[i] > logits[argmax]) argmax = i;
    }
    if (logits[argmax] == -INFINITY) fail(GPT_ERR_NON_FINITE, "the model's logits are -inf for every token");
    if (temperature_ <= 0.0f) return argmax;

    // Scaled after subtracting the largest, so that a tiny temperature drives the others to -inf, never the top one
    // to +inf: softmax weights exp(value) are then in (0, 1], the top one exactly 1.
    const float max_logit = logits[argmax];
    candidates_.clear();
    for (gpt_token i = 0; i < vocab_size; ++i) candidates_.emplace_back((logits[i] - max_logit) / temperature_, i);
    std::sort(candidates_.begin(), candidates_.end(), before);
    if (top_k_ > 0 && top_k_ < vocab_size) candidates_.resize(static_cast<size_t>(top_k_));

    // Softmax in place: values become probabilities.
    double total = 0.0;
    for (auto &c : candidates_) {
        c.first = std::exp(c.first);
        total += c.first;
    }
    double kept = 0.0;
    size_t n = 0;
    while (n < candidates_.size()) {
        kept += candidates_[n].first / total;
        ++n;
        if (top_p_ < 1.0f && kept >= top_p_) break;  // smallest prefix holding top_p of the mass
    }
    candidates_.resize(n);

    double r = uniform() * kept * total;
    for (const auto &c : candidates_) {
        r -= c.first;
        if (r < 0.0) return c.second;
    }
    return candidates_.back().second;  // rounding left r a hair above zero
}

}  // namespace gpt
