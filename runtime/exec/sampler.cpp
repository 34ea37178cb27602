// sampler.cpp — the logits adjusted (bias, penalties), softmax over the surviving candidates, then one uniform draw.
// A GPT-2 vocabulary is 50 257 tokens and a batched step samples every row, so
// nothing here sorts the whole vocabulary: plain temperature sampling walks the
// ids in order, and top-k / top-p sort only the head of the distribution they keep.
#include "exec/sampler.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "base/error.h"

namespace gpt {

namespace {

// Larger value first; equal values by smaller id, so the order never depends on the sort.
bool before(const std::pair<float, gpt_token> &a, const std::pair<float, gpt_token> &b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// Sorts the largest `n` of [first, last) (by `before`) to its front and leaves the rest after them, unordered.
template <typename It>
void sort_head(It first, It last, size_t n) {
    const It head_end = first + static_cast<std::ptrdiff_t>(std::min(n, static_cast<size_t>(last - first)));
    std::nth_element(first, head_end, last, before);
    std::sort(first, head_end, before);
}

}  // namespace

void check_sampling_settings(float temperature, int32_t top_k, float top_p) {
    if (top_k < 0 || !(top_p > 0.0f && top_p <= 1.0f) || !(temperature >= 0.0f))
        fail(GPT_ERR_INVALID_ARGUMENT, "need temperature >= 0, top_k >= 0 and 0 < top_p <= 1");
}

gpt_token check_logits(const float *logits, int32_t vocab_size) {
    // -inf is a token ruled out; NaN or +inf is a model that overflowed, and nothing can be drawn from it.
    // Two passes, where one running argmax compared a token at a time (a batch-1 greedy pick 43 µs, 30 µs so): the
    // largest value and whether any is NaN or +inf in LANES independent lanes, which the compiler may vectorize;
    // then the first token holding the largest.
    constexpr int32_t LANES = 16;
    float top[LANES];
    int32_t unusable[LANES] = {};
    std::fill(std::begin(top), std::end(top), -INFINITY);
    int32_t i = 0;
    for (; i + LANES <= vocab_size; i += LANES)
        for (int32_t lane = 0; lane < LANES; ++lane) {
            const float value = logits[i + lane];
            unusable[lane] |= static_cast<int32_t>(!(value < INFINITY));  // NaN compares false
            top[lane] = value > top[lane] ? value : top[lane];
        }
    for (int32_t lane = 0; i < vocab_size; ++i, ++lane) {
        unusable[lane] |= static_cast<int32_t>(!(logits[i] < INFINITY));
        top[lane] = logits[i] > top[lane] ? logits[i] : top[lane];
    }
    if (std::any_of(std::begin(unusable), std::end(unusable), [](int32_t u) { return u != 0; }))
        for (gpt_token t = 0; t < vocab_size; ++t)
            if (!(logits[t] < INFINITY))
                fail(GPT_ERR_NON_FINITE, "the model's logits hold " + std::to_string(logits[t]) + " at token " +
                                             std::to_string(t) + "; nothing can be sampled from them");
    const float largest = *std::max_element(std::begin(top), std::end(top));
    if (largest == -INFINITY) fail(GPT_ERR_NON_FINITE, "the model's logits are -inf for every token");
    return static_cast<gpt_token>(std::find(logits, logits + vocab_size, largest) - logits);
}

void check_adjustments(const LogitAdjustments &adjust) {
    if (!std::isfinite(adjust.presence) || !std::isfinite(adjust.frequency))
        fail(GPT_ERR_INVALID_ARGUMENT, "the presence and frequency penalties must be finite");
    std::vector<gpt_token> tokens;
    for (const auto &[token, bias] : adjust.bias) {
        if (token < 0 || !std::isfinite(bias))
            fail(GPT_ERR_INVALID_ARGUMENT, "a logit bias needs a token id >= 0 and a finite value, not token " +
                                               std::to_string(token) + " with " + std::to_string(bias));
        tokens.push_back(token);
    }
    std::sort(tokens.begin(), tokens.end());
    if (const auto twice = std::adjacent_find(tokens.begin(), tokens.end()); twice != tokens.end())
        fail(GPT_ERR_INVALID_ARGUMENT, "the logit bias names token " + std::to_string(*twice) + " twice");
}

Sampler::Sampler(float temperature, int32_t top_k, float top_p, uint64_t seed, const LogitAdjustments &adjust)
    : temperature_(temperature),
      top_k_(top_k),
      top_p_(top_p),
      rng_(seed),
      presence_(adjust.presence),
      frequency_(adjust.frequency) {
    check_sampling_settings(temperature, top_k, top_p);
    check_adjustments(adjust);
    for (const auto &[token, bias] : adjust.bias)
        if (bias != 0.0f) bias_[token] = bias;
}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

gpt_token Sampler::sample(const float *logits, int32_t vocab_size) {
    check_vocab(vocab_size);
    const float *row = adjusted(logits, vocab_size);
    return sample_checked(row, vocab_size, check_logits(row, vocab_size));
}

gpt_token Sampler::sample_checked(const float *logits, int32_t vocab_size, gpt_token argmax) {
    gpt_token token = argmax;
    // Scaled after subtracting the largest, so that a tiny temperature drives the others to -inf, never the top one
    // to +inf: softmax weights exp(value) are then in (0, 1], the top one exactly 1.
    const bool truncated = (top_k_ > 0 && top_k_ < vocab_size) || top_p_ < 1.0f;
    if (temperature_ > 0.0f)
        token = truncated ? sample_truncated(logits, vocab_size, logits[argmax])
                          : sample_all(logits, vocab_size, logits[argmax]);
    count(token);
    return token;
}

void Sampler::check_vocab(int32_t vocab_size) const {
    if (!bias_.empty() && bias_.rbegin()->first >= vocab_size)
        fail(GPT_ERR_OUT_OF_RANGE, "the logit bias names token " + std::to_string(bias_.rbegin()->first) +
                                       ", outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
}

std::vector<std::pair<gpt_token, float>> Sampler::additions() const {
    std::map<gpt_token, float> sum = bias_;
    for (const auto &[token, times] : drawn_) sum[token] -= static_cast<float>(times) * frequency_ + presence_;
    return {sum.begin(), sum.end()};
}

const float *Sampler::adjusted(const float *logits, int32_t vocab_size) {
    if (bias_.empty() && drawn_.empty()) return logits;
    adjusted_.assign(logits, logits + vocab_size);
    for (const auto &[token, add] : additions())
        if (token < vocab_size) adjusted_[static_cast<size_t>(token)] += add;  // -inf (ruled out) stays -inf
    return adjusted_.data();
}

void Sampler::count(gpt_token token) {
    if (presence_ != 0.0f || frequency_ != 0.0f) ++drawn_[token];
}

// Every token keeps its chance: one pass for the weights, one walk in id order.
gpt_token Sampler::sample_all(const float *logits, int32_t vocab_size, float max_logit) {
    weights_.resize(static_cast<size_t>(vocab_size));
    double total = 0.0;
    gpt_token last_possible = 0;  // the last id with a weight: where rounding may leave the walk
    for (gpt_token i = 0; i < vocab_size; ++i) {
        const double w = std::exp(static_cast<double>((logits[i] - max_logit) / temperature_));
        weights_[static_cast<size_t>(i)] = w;
        total += w;
        if (w > 0.0) last_possible = i;
    }
    double r = uniform() * total;
    for (gpt_token i = 0; i < vocab_size; ++i) {
        r -= weights_[static_cast<size_t>(i)];
        if (r < 0.0) return i;
    }
    return last_possible;
}

// top-k and/or top-p: the kept head of the distribution, most likely first. Only as
// much of it is sorted as the rule needs (top-p grows the sorted head until it holds
// top_p of the mass, which is usually a few dozen tokens).
gpt_token Sampler::sample_truncated(const float *logits, int32_t vocab_size, float max_logit) {
    candidates_.clear();
    for (gpt_token i = 0; i < vocab_size; ++i) candidates_.emplace_back((logits[i] - max_logit) / temperature_, i);
    const auto begin = candidates_.begin();
    size_t kept = candidates_.size();
    size_t sorted = 0;  // candidates_[0, sorted) are in order and no later one is larger
    if (top_k_ > 0 && top_k_ < vocab_size) {
        kept = sorted = static_cast<size_t>(top_k_);
        sort_head(begin, candidates_.end(), kept);
    }
    double total = 0.0;  // softmax denominator over the top-k candidates (all when top-k is off)
    for (size_t i = 0; i < kept; ++i) total += std::exp(static_cast<double>(candidates_[i].first));

    double mass = total;  // weight of the kept prefix
    size_t n = kept;
    if (top_p_ < 1.0f) {  // the smallest prefix holding top_p of the mass
        mass = 0.0;
        n = 0;
        while (n < kept) {
            if (n == sorted) {  // sort the next part of the head: 64 tokens, then four times as many each time
                const size_t next = std::min(kept, std::max<size_t>(64, sorted * 4));
                sort_head(begin + static_cast<std::ptrdiff_t>(sorted), begin + static_cast<std::ptrdiff_t>(kept),
                          next - sorted);
                sorted = next;
            }
            mass += std::exp(static_cast<double>(candidates_[n].first));
            ++n;
            if (mass / total >= top_p_) break;
        }
    }

    double r = uniform() * mass;
    size_t last_possible = 0;
    for (size_t i = 0; i < n; ++i) {
        const double w = std::exp(static_cast<double>(candidates_[i].first));
        if (w > 0.0) last_possible = i;
        r -= w;
        if (r < 0.0) return candidates_[i].second;
    }
    return candidates_[last_possible].second;  // rounding left r a hair above zero
}

SampledRows sample_rows(Sampler *const *samplers, int32_t n_rows, const float *logits, int32_t vocab_size) {
    SampledRows out{std::vector<gpt_token>(static_cast<size_t>(n_rows), GPT_TOKEN_NONE), {}};
    for (int32_t i = 0; i < n_rows; ++i)
        if (samplers[i] != nullptr) samplers[i]->check_vocab(vocab_size);
    for (int32_t i = 0; i < n_rows; ++i) {
        if (samplers[i] == nullptr) continue;
        const float *row =
            samplers[i]->adjusted(logits + static_cast<size_t>(i) * static_cast<size_t>(vocab_size), vocab_size);
        gpt_token argmax = GPT_TOKEN_NONE;
        try {
            argmax = check_logits(row, vocab_size);
        } catch (const Error &) {
            out.refused.push_back(i);
            continue;
        }
        out.tokens[static_cast<size_t>(i)] = samplers[i]->sample_checked(row, vocab_size, argmax);
    }
    return out;
}

void log_probabilities(const float *logits, int32_t vocab_size, gpt_token chosen, int32_t n_top,
                       gpt_token_logprob *out) {
    float max_logit = -INFINITY;
    for (gpt_token i = 0; i < vocab_size; ++i) max_logit = std::max(max_logit, logits[i]);
    double sum = 0.0;
    for (gpt_token i = 0; i < vocab_size; ++i) sum += std::exp(static_cast<double>(logits[i]) - max_logit);
    const double log_normalizer = max_logit + std::log(sum);
    auto logprob = [&](gpt_token t) { return static_cast<float>(static_cast<double>(logits[t]) - log_normalizer); };
    out[0] = {chosen, logprob(chosen)};
    if (n_top <= 0) return;
    std::vector<std::pair<float, gpt_token>> all(static_cast<size_t>(vocab_size));
    for (gpt_token i = 0; i < vocab_size; ++i) all[static_cast<size_t>(i)] = {logits[i], i};
    const auto n = static_cast<size_t>(std::min(n_top, vocab_size));
    sort_head(all.begin(), all.end(), n);
    for (size_t i = 0; i < n; ++i)  // a token ruled out (an id without text: Model masks it) is no candidate
        out[1 + i] = all[i].first == -INFINITY ? gpt_token_logprob{GPT_TOKEN_NONE, -INFINITY}
                                               : gpt_token_logprob{all[i].second, logprob(all[i].second)};
    for (auto i = static_cast<size_t>(vocab_size); i < static_cast<size_t>(n_top); ++i)
        out[1 + i] = {GPT_TOKEN_NONE, -INFINITY};  // asked for more tokens than the vocabulary has
}

}  // namespace gpt
