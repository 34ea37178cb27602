// c_api_sampler.cpp — the C ABI of samplers: one per sequence, every row of a
// batched step drawn in one call, with log-probabilities when asked.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "abi/c_api_guard.h"
#include "abi/versioned_struct.h"
#include "exec/sampler.h"

using gpt::c_api::guarded;
using gpt::c_api::read_versioned;
using gpt::c_api::require;

gpt_sampler::gpt_sampler(const gpt_sampler_params &p)
    : impl(p.temperature, p.top_k, p.top_p, p.seed, [&p] {
          require(p.n_logit_bias >= 0 && (p.n_logit_bias == 0 || p.logit_bias != nullptr),
                  "logit_bias must hold n_logit_bias >= 0 entries");
          gpt::LogitAdjustments adjust{{}, p.presence_penalty, p.frequency_penalty};
          for (int32_t i = 0; i < p.n_logit_bias; ++i)
              adjust.bias.emplace_back(p.logit_bias[i].token, p.logit_bias[i].bias);
          return adjust;
      }()) {}

namespace {

// What a row that cannot be sampled (NaN, +inf, all -inf) does to a sample_batch call.
enum class NonFinite {
    refuse_call,  // gpt_sampler_sample_batch: the call fails before any sampler draws
    refuse_row,   // _v2, as gpt_session_decode_sample_batch: that row alone gets nothing, the others are drawn
};

void sample_batch(gpt_sampler *const *samplers, int32_t n_seq, const float *logits, int32_t vocab_size,
                  gpt_token *out_tokens, int32_t n_top_logprobs, gpt_token_logprob *out_logprobs, NonFinite rule) {
    require(samplers != nullptr && logits != nullptr && out_tokens != nullptr,
            "samplers, logits and out_tokens must not be NULL");
    require(n_seq > 0 && vocab_size > 0, "n_seq and vocab_size must be > 0");
    if (n_top_logprobs < 0 || n_top_logprobs > GPT_MAX_TOP_LOGPROBS)
        gpt::fail(GPT_ERR_INVALID_ARGUMENT, "n_top_logprobs must be in [0, " + std::to_string(GPT_MAX_TOP_LOGPROBS) +
                                                "], not " + std::to_string(n_top_logprobs));
    const auto row = [&](int32_t i) { return logits + static_cast<size_t>(i) * static_cast<size_t>(vocab_size); };
    // Every argument, and under refuse_call every row as its sampler will draw from it (adjusted: a finite bias
    // can still overflow a huge logit), is checked before any sampler draws: a refused call moves no random
    // stream and counts no token.
    std::vector<gpt::Sampler *> rows(static_cast<size_t>(n_seq), nullptr);
    for (int32_t i = 0; i < n_seq; ++i) {
        if (samplers[i] == nullptr) continue;
        for (int32_t other = 0; other < i; ++other)  // each row draws from its own stream and counts
            if (samplers[other] == samplers[i])
                gpt::fail(GPT_ERR_INVALID_ARGUMENT, "row " + std::to_string(i) + " has the sampler of row " +
                                                        std::to_string(other) + ": each row needs its own");
        rows[static_cast<size_t>(i)] = &samplers[i]->impl;
        samplers[i]->impl.check_vocab(vocab_size);
        if (rule == NonFinite::refuse_row) continue;
        try {
            gpt::check_logits(samplers[i]->impl.adjusted(row(i), vocab_size), vocab_size);
        } catch (const gpt::Error &e) {
            gpt::fail(e.status(), "row " + std::to_string(i) + ": " + e.what());
        }
    }
    const gpt::SampledRows sampled = gpt::sample_rows(rows.data(), n_seq, logits, vocab_size);
    if (!sampled.refused.empty() && rule == NonFinite::refuse_call)  // checked above: never left half drawn unsaid
        gpt::fail(GPT_ERR_INTERNAL, "row " + std::to_string(sampled.refused.front()) + " was refused after its check");
    std::copy(sampled.tokens.begin(), sampled.tokens.end(), out_tokens);
    if (out_logprobs != nullptr) {
        const size_t stride = 1 + static_cast<size_t>(n_top_logprobs);
        for (int32_t i = 0; i < n_seq; ++i) {
            gpt_token_logprob *entries = out_logprobs + static_cast<size_t>(i) * stride;
            if (out_tokens[i] != GPT_TOKEN_NONE)
                gpt::log_probabilities(row(i), vocab_size, out_tokens[i], n_top_logprobs, entries);
            else if (samplers[i] != nullptr)  // refused: nothing to list
                std::fill(entries, entries + stride, gpt_token_logprob{GPT_TOKEN_NONE, -INFINITY});
        }
    }
    if (sampled.refused.empty()) return;
    std::string which;
    for (const int32_t i : sampled.refused) which += (which.empty() ? "" : ", ") + std::to_string(i);
    gpt::fail(GPT_ERR_NON_FINITE, "row " + which +
                                      ": the logits hold NaN or +inf, or are -inf for every token (after the "
                                      "sampler's bias and penalties); nothing can be sampled from them (the other "
                                      "rows' tokens are drawn)");
}

}  // namespace

extern "C" {

gpt_status gpt_sampler_create(const struct gpt_sampler_params *params, struct gpt_sampler **out_sampler) {
    return guarded(__func__, [&] {
        require(params != nullptr && out_sampler != nullptr, "params and out_sampler must not be NULL");
        *out_sampler = new gpt_sampler(read_versioned(params));
    });
}

gpt_status gpt_sampler_free(struct gpt_sampler *sampler) {
    return guarded(__func__, [&] { delete sampler; });
}

gpt_status gpt_sampler_sample_batch(struct gpt_sampler *const *samplers, int32_t n_seq, const float *logits,
                                    int32_t vocab_size, gpt_token *out_tokens, int32_t n_top_logprobs,
                                    struct gpt_token_logprob *out_logprobs) {
    return guarded(__func__, [&] {
        sample_batch(samplers, n_seq, logits, vocab_size, out_tokens, n_top_logprobs, out_logprobs,
                     NonFinite::refuse_call);
    });
}

gpt_status gpt_sampler_sample_batch_v2(struct gpt_sampler *const *samplers, int32_t n_seq, const float *logits,
                                       int32_t vocab_size, gpt_token *out_tokens, int32_t n_top_logprobs,
                                       struct gpt_token_logprob *out_logprobs) {
    return guarded(__func__, [&] {
        sample_batch(samplers, n_seq, logits, vocab_size, out_tokens, n_top_logprobs, out_logprobs,
                     NonFinite::refuse_row);
    });
}

}  // extern "C"
