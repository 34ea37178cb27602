// sampler.h — next-token choice from logits: a logit bias and repetition penalties, then
// greedy, temperature, top-k, top-p; and the log-probabilities a caller may report beside the choice.
// Deterministic for a seed: the same logits and seed give the same tokens on every platform.
#pragma once

#include <cstdint>
#include <map>
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

// What a sampler adds to the logits before its rule, as OpenAI's completions define it: `bias` to
// its tokens always (logit_bias), and to each token this sampler has drawn c > 0 times so far,
// -(c * frequency + presence) (frequency_penalty, presence_penalty).
struct LogitAdjustments {
    std::vector<std::pair<gpt_token, float>> bias;  // distinct tokens, any order
    float presence = 0.0f;
    float frequency = 0.0f;
};

// GPT_ERR_INVALID_ARGUMENT unless every bias is finite with a token >= 0 named once and both
// penalties are finite.
void check_adjustments(const LogitAdjustments &adjust);

class Sampler {
public:
    Sampler(float temperature, int32_t top_k, float top_p, uint64_t seed, const LogitAdjustments &adjust = {});
    // Logits may be -inf (a token ruled out); NaN, +inf or all -inf throw GPT_ERR_NON_FINITE.
    // Adjusts them (adjusted()) first, and counts the token drawn for the penalties.
    gpt_token sample(const float *logits, int32_t vocab_size);
    // As sample, for logits already adjusted that check_logits has passed, with the argmax it returned
    // (a batch adjusts and checks every row first).
    gpt_token sample_checked(const float *logits, int32_t vocab_size, gpt_token argmax);

    // GPT_ERR_OUT_OF_RANGE when the bias names a token outside a vocabulary of vocab_size: checked
    // before anything is drawn, so that a refused call moves no sampler.
    void check_vocab(int32_t vocab_size) const;
    // The logits with this sampler's adjustments added (a copy the sampler keeps until its next
    // call), or `logits` itself when there is nothing to add.
    const float *adjusted(const float *logits, int32_t vocab_size);
    // What adjusted() adds now, by token (in id order, no token twice): for a rule applied elsewhere.
    std::vector<std::pair<gpt_token, float>> additions() const;
    // A token drawn elsewhere (device_sampling.h) by this sampler's rule: counted for the penalties.
    void count(gpt_token token);

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
    std::map<gpt_token, float> bias_;
    float presence_;
    float frequency_;
    std::map<gpt_token, int32_t> drawn_;  // token -> times drawn, kept only when a penalty is set
    std::vector<float> adjusted_;         // the last adjusted row
    std::vector<double> weights_;         // softmax numerators, reused across calls
    std::vector<Candidate> candidates_;   // reused across calls
};

// One token per row of a step, as the session's sampling calls return them.
struct SampledRows {
    std::vector<gpt_token> tokens;  // GPT_TOKEN_NONE for a row left out or refused
    std::vector<int32_t> refused;   // rows whose logits nothing can be drawn from; their samplers did not draw
};

// One token per row of `logits` (n_rows rows of vocab_size floats), drawn by samplers[row] from the row
// as it adjusts it; a NULL sampler leaves its row out. A row that check_logits refuses is refused alone:
// the others are drawn. A bias outside the vocabulary (check_vocab) fails the call before any draw.
SampledRows sample_rows(Sampler *const *samplers, int32_t n_rows, const float *logits, int32_t vocab_size);

// out[0] = `chosen` with its log-probability, then the `n_top` most likely tokens
// (most likely first, equal ones by smaller id): log-softmax of the raw logits. A token
// ruled out (-inf, as the model's ids without text are) is never listed: GPT_TOKEN_NONE
// with -inf stands in its place, as past the end of the vocabulary.
void log_probabilities(const float *logits, int32_t vocab_size, gpt_token chosen, int32_t n_top,
                       gpt_token_logprob *out);

}  // namespace gpt

struct gpt_sampler {
    explicit gpt_sampler(const gpt_sampler_params &p);
    gpt::Sampler impl;
};
