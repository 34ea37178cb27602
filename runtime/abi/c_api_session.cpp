// c_api_session.cpp — the C ABI of sessions: prefill, decode (one sequence or a
// batch), sequences as caches (extend, truncate, copy, abort) and generation.
#include <cstddef>
#include <string>
#include <vector>

#include "abi/c_api_guard.h"
#include "abi/versioned_struct.h"
#include "exec/model.h"
#include "exec/session.h"

using gpt::c_api::guarded;
using gpt::c_api::read_versioned;
using gpt::c_api::require;

namespace {

// The _v2 calls' check of `logits` against the `rows` rows of vocab_size floats the call writes, made
// before anything runs. `optional`: NULL with capacity 0 asks for no logits.
void require_logits(const gpt_session *session, const float *logits, size_t capacity, int32_t rows,
                    bool optional = false) {
    require(session != nullptr, "session must not be NULL");
    if (logits == nullptr) {
        if (!optional) gpt::fail(GPT_ERR_INVALID_ARGUMENT, "logits must not be NULL");
        if (capacity != 0)
            gpt::fail(GPT_ERR_INVALID_ARGUMENT,
                      "logits is NULL but logits_capacity is " + std::to_string(capacity) + ": NULL asks for none");
        return;
    }
    const auto needed = static_cast<size_t>(rows) * static_cast<size_t>(session->impl.vocab_size());
    if (capacity < needed)
        gpt::fail(GPT_ERR_BUFFER_TOO_SMALL, "logits holds " + std::to_string(capacity) + " floats; this call writes " +
                                                std::to_string(needed) + " (" + std::to_string(rows) + " row" +
                                                (rows == 1 ? "" : "s") + " of " +
                                                std::to_string(session->impl.vocab_size()) + ")");
}

// gpt_session_decode_sample_batch's body, the session checked.
void decode_sample(gpt_session *session, const gpt_token *tokens, gpt_sampler *const *samplers, gpt_token *out_tokens,
                   float *logits) {
    require(tokens != nullptr && samplers != nullptr && out_tokens != nullptr,
            "tokens, samplers and out_tokens must not be NULL");
    std::vector<gpt::Sampler *> rows(static_cast<size_t>(session->impl.n_seq()), nullptr);
    for (size_t i = 0; i < rows.size(); ++i)
        if (samplers[i] != nullptr) rows[i] = &samplers[i]->impl;
    session->impl.decode_sample_batch(tokens, rows.data(), out_tokens, logits);
}

}  // namespace

extern "C" {

gpt_status gpt_session_create(struct gpt_model *model, struct gpt_session **out_session) {
    return gpt_session_create_batch(model, 1, out_session);
}

gpt_status gpt_session_create_batch(struct gpt_model *model, int32_t n_seq, struct gpt_session **out_session) {
    return guarded(__func__, [&] {
        require(model != nullptr && out_session != nullptr, "model and out_session must not be NULL");
        *out_session = new gpt_session(model->impl, n_seq);
    });
}

gpt_status gpt_session_free(struct gpt_session *session) {
    return guarded(__func__, [&] { delete session; });
}

gpt_status gpt_session_reset(struct gpt_session *session) {
    return guarded(__func__, [&] {
        require(session != nullptr, "session must not be NULL");
        session->impl.reset();
    });
}

gpt_status gpt_session_get_position(const struct gpt_session *session, int32_t *out_position) {
    return gpt_session_get_position_seq(session, 0, out_position);
}

gpt_status gpt_session_get_position_seq(const struct gpt_session *session, int32_t seq, int32_t *out_position) {
    return guarded(__func__, [&] {
        require(session != nullptr && out_position != nullptr, "session and out_position must not be NULL");
        *out_position = session->impl.position(seq);
    });
}

gpt_status gpt_session_prefill(struct gpt_session *session, const gpt_token *tokens, int32_t n_tokens, float *logits) {
    return gpt_session_prefill_seq(session, 0, tokens, n_tokens, logits);
}

gpt_status gpt_session_prefill_seq(struct gpt_session *session, int32_t seq, const gpt_token *tokens, int32_t n_tokens,
                                   float *logits) {
    return guarded(__func__, [&] {
        require(session != nullptr && tokens != nullptr && logits != nullptr,
                "session, tokens and logits must not be NULL");
        session->impl.prefill(seq, tokens, n_tokens, logits);
    });
}

gpt_status gpt_session_prefill_batch(struct gpt_session *session, const gpt_token *const *prompts,
                                     const int32_t *n_tokens, float *logits) {
    return guarded(__func__, [&] {
        require(session != nullptr && prompts != nullptr && n_tokens != nullptr && logits != nullptr,
                "session, prompts, n_tokens and logits must not be NULL");
        session->impl.prefill_batch(prompts, n_tokens, logits);
    });
}

gpt_status gpt_session_decode(struct gpt_session *session, gpt_token token, float *logits) {
    return guarded(__func__, [&] {
        require(session != nullptr && logits != nullptr, "session and logits must not be NULL");
        session->impl.decode(0, token, logits);
    });
}

gpt_status gpt_session_decode_batch(struct gpt_session *session, const gpt_token *tokens, float *logits) {
    return guarded(__func__, [&] {
        require(session != nullptr && tokens != nullptr && logits != nullptr,
                "session, tokens and logits must not be NULL");
        session->impl.decode_batch(tokens, logits);
    });
}

gpt_status gpt_session_extend_seq(struct gpt_session *session, int32_t seq, const gpt_token *tokens, int32_t n_tokens,
                                  float *logits) {
    return guarded(__func__, [&] {
        require(session != nullptr && tokens != nullptr, "session and tokens must not be NULL");
        session->impl.extend(seq, tokens, n_tokens, logits);
    });
}

gpt_status gpt_session_truncate_seq(struct gpt_session *session, int32_t seq, int32_t n_tokens) {
    return guarded(__func__, [&] {
        require(session != nullptr, "session must not be NULL");
        session->impl.truncate(seq, n_tokens);
    });
}

gpt_status gpt_session_copy_seq(struct gpt_session *session, int32_t src, int32_t dst, int32_t n_tokens) {
    return guarded(__func__, [&] {
        require(session != nullptr, "session must not be NULL");
        session->impl.copy(src, dst, n_tokens);
    });
}

gpt_status gpt_session_set_abort_callback(struct gpt_session *session, gpt_abort_callback callback, void *user_data) {
    return guarded(__func__, [&] {
        require(session != nullptr, "session must not be NULL");
        session->impl.set_abort_callback(callback, user_data);
    });
}

gpt_status gpt_session_decode_sample_batch(struct gpt_session *session, const gpt_token *tokens,
                                           struct gpt_sampler *const *samplers, gpt_token *out_tokens, float *logits) {
    return guarded(__func__, [&] {
        require(session != nullptr, "session must not be NULL");
        decode_sample(session, tokens, samplers, out_tokens, logits);
    });
}

// ---- the _v2 forms: the same calls, each checking its buffer's size first ------------------------------

gpt_status gpt_session_prefill_seq_v2(struct gpt_session *session, int32_t seq, const gpt_token *tokens,
                                      int32_t n_tokens, float *logits, size_t logits_capacity) {
    return guarded(__func__, [&] {
        require_logits(session, logits, logits_capacity, 1);
        require(tokens != nullptr, "tokens must not be NULL");
        session->impl.prefill(seq, tokens, n_tokens, logits);
    });
}

gpt_status gpt_session_decode_seq_v2(struct gpt_session *session, int32_t seq, gpt_token token, float *logits,
                                     size_t logits_capacity) {
    return guarded(__func__, [&] {
        require_logits(session, logits, logits_capacity, 1);
        session->impl.decode(seq, token, logits);
    });
}

gpt_status gpt_session_prefill_batch_v2(struct gpt_session *session, const gpt_token *const *prompts,
                                        const int32_t *n_tokens, float *logits, size_t logits_capacity) {
    return guarded(__func__, [&] {
        require(session != nullptr, "session must not be NULL");
        require_logits(session, logits, logits_capacity, session->impl.n_seq());
        require(prompts != nullptr && n_tokens != nullptr, "prompts and n_tokens must not be NULL");
        session->impl.prefill_batch(prompts, n_tokens, logits);
    });
}

gpt_status gpt_session_decode_batch_v2(struct gpt_session *session, const gpt_token *tokens, float *logits,
                                       size_t logits_capacity) {
    return guarded(__func__, [&] {
        require(session != nullptr, "session must not be NULL");
        require_logits(session, logits, logits_capacity, session->impl.n_seq());
        require(tokens != nullptr, "tokens must not be NULL");
        session->impl.decode_batch(tokens, logits);
    });
}

gpt_status gpt_session_extend_seq_v2(struct gpt_session *session, int32_t seq, const gpt_token *tokens,
                                     int32_t n_tokens, float *logits, size_t logits_capacity) {
    return guarded(__func__, [&] {
        require_logits(session, logits, logits_capacity, 1, /*optional=*/true);
        require(tokens != nullptr, "tokens must not be NULL");
        session->impl.extend(seq, tokens, n_tokens, logits);
    });
}

gpt_status gpt_session_decode_sample_batch_v2(struct gpt_session *session, const gpt_token *tokens,
                                              struct gpt_sampler *const *samplers, gpt_token *out_tokens, float *logits,
                                              size_t logits_capacity) {
    return guarded(__func__, [&] {
        require(session != nullptr, "session must not be NULL");
        require_logits(session, logits, logits_capacity, session->impl.n_seq(), /*optional=*/true);
        decode_sample(session, tokens, samplers, out_tokens, logits);
    });
}

gpt_status gpt_session_append_sample_batch(struct gpt_session *session, const gpt_token *const *tokens,
                                           const int32_t *n_tokens, struct gpt_sampler *const *samplers,
                                           gpt_token *out_tokens, float *logits, size_t logits_capacity) {
    return guarded(__func__, [&] {
        require(session != nullptr, "session must not be NULL");
        require_logits(session, logits, logits_capacity, session->impl.n_seq(), /*optional=*/true);
        require(tokens != nullptr && n_tokens != nullptr && out_tokens != nullptr,
                "tokens, n_tokens and out_tokens must not be NULL");
        std::vector<gpt::Sampler *> rows(static_cast<size_t>(session->impl.n_seq()), nullptr);
        if (samplers != nullptr)
            for (size_t i = 0; i < rows.size(); ++i)
                if (samplers[i] != nullptr) rows[i] = &samplers[i]->impl;
        session->impl.append_sample_batch(tokens, n_tokens, rows.data(), out_tokens, logits);
    });
}

gpt_status gpt_session_generate(struct gpt_session *session, const gpt_token *prompt, int32_t n_prompt,
                                const struct gpt_generate_params *params, gpt_token *out_tokens, int32_t capacity,
                                int32_t *out_count) {
    return guarded(__func__, [&] {
        require(session != nullptr && prompt != nullptr && params != nullptr && out_tokens != nullptr &&
                    out_count != nullptr,
                "session, prompt, params, out_tokens and out_count must not be NULL");
        const gpt_generate_params p = read_versioned(params);
        if (p.max_new_tokens <= 0) gpt::fail(GPT_ERR_INVALID_ARGUMENT, "max_new_tokens must be > 0");
        if (capacity < p.max_new_tokens)
            gpt::fail(GPT_ERR_BUFFER_TOO_SMALL, "out_tokens holds " + std::to_string(capacity) +
                                                    " tokens, max_new_tokens is " + std::to_string(p.max_new_tokens));
        const gpt::Session::Generated generated = session->impl.generate(prompt, n_prompt, p);
        // Written on cancellation too: the tokens the callback has already seen are the caller's.
        std::copy(generated.tokens.begin(), generated.tokens.end(), out_tokens);
        if (p.token_logprobs != nullptr)
            std::copy(generated.logprobs.begin(), generated.logprobs.end(), p.token_logprobs);
        *out_count = static_cast<int32_t>(generated.tokens.size());
        if (generated.cancelled)
            gpt::fail(GPT_ERR_ABORTED, "generation stopped by the token callback after " +
                                           std::to_string(generated.tokens.size()) + " tokens");
    });
}

}  // extern "C"
