// sampler.h — next-token choice from logits: greedy, temperature, top-k, top-p,
// and the log-probabilities a caller may report beside the choice.
// Deterministic for a seed: the same logits and seed give the same tokens on every platform.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gpt_runtime.h"

namespace gpt {

// GPT_ERR_INVALID_ARGUMENT unless temperature >= 0, top_k >= 0 and 0 < top_p <= 1.
void check_sampling_settings(float temperature, int32_t top_k, float top_p);

// GPT_ERR_NON_FINITE when nothing can be drawn from `logits`: a NaN or +inf (a model
// that overflowed) or every token -inf. Returns the argmax (first on ties).
gpt_token check_logits(const float *logits, int32_t vocab_size);

class Sampler {
public:
    Sampler(float temperature, int32_t top_k, float top_p, uint64_t seed);
    // Logits may be -inf (a token ruled out); NaN, +inf or all -inf throw GPT_ERR_NON_FINITE.
    gpt_token sample(const float *logits, int32_t vocab_size);
    // As sample, for logits check_logits has passed, with the argmax it returned (a batch checks every row first).
    gpt_token sample_checked(const float *logits, int32_t vocab_size, gpt_token argmax);

    // For sampling elsewhere (device_sampling.h) from the same random stream: the settings, and the one
    // uniform draw in [0, 1) that sample() makes for a token when temperature > 0 (greedy draws none).
    float temperature() const { return temperature_; }
    int32_t top_k() const { return top_k_; }
    float top_p() const { return top_p_; }
    double draw() { return uniform(); }
    // The random stream's state, to put back when a draw made for a refused step must not count.
    using Stream = std::mt19937_64;
    const Stream &stream() const { return rng_; }
    void restore(const Stream &stream) { rng_ = stream; }

private:
    using Candidate = std::pair<float, gpt_token>;  // (logit / temperature - max, id)

    double uniform();  // [0, 1), from the raw 64-bit engine so no library distribution varies it
    gpt_token sample_all(const float *logits, int32_t vocab_size, float max_logit);
    gpt_token sample_truncated(const float *logits, int32_t vocab_size, float max_logit);

    float temperature_;
    int32_t top_k_;
    float top_p_;
    Stream rng_;
    std::vector<double> weights_;        // softmax numerators, reused across calls
    std::vector<Candidate> candidates_;  // reused across calls
};

// One token per row of a step, as the session's sampling calls return them.
struct SampledRows {
    std::vector<gpt_token> tokens;  // GPT_TOKEN_NONE for a row left out or refused
    std::vector<int32_t> refused;   // rows whose logits nothing can be drawn from; their samplers did not draw
};

// One token per row of `logits` (n_rows rows of vocab_size floats), drawn by samplers[row]; a NULL
// sampler leaves its row out. A row that check_logits refuses is refused alone: the others are drawn.
SampledRows sample_rows(Sampler *const *samplers, int32_t n_rows, const float *logits, int32_t vocab_size);

// out[0] = `chosen` with its log-probability, then the `n_top` most likely tokens
// (most likely first, equal ones by smaller id): log-softmax of the raw logits. A token
// ruled out (-inf, as the model's ids without text are) is never listed: GPT_TOKEN_NONE
// with -inf stands in its place, as past the end of the vocabulary.
void log_probabilities(const float *logits, int32_t vocab_size, gpt_token chosen, int32_t n_top,
                       gpt_token_logprob *out);

}  // namespace gpt

struct gpt_sampler {
    explicit gpt_sampler(const gpt_sampler_params &p) : impl(p.temperature, p.top_k, p.top_p, p.seed) {}
    gpt::Sampler impl;
};
