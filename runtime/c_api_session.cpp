// c_api_session.cpp — the C ABI of sessions: prefill, decode (one sequence or a
// batch) and generation.
#include <vector>

#include "c_api_guard.h"
#include "model.h"
#include "session.h"

using gpt::c_api::guarded;
using gpt::c_api::require;

extern "C" {

gpt_status gpt_session_create(struct gpt_model *model, struct gpt_session **out_session) {
    return gpt_session_create_batch(model, 1, out_session);
}

gpt_status gpt_session_create_batch(struct gpt_model *model, int32_t n_seq, struct gpt_session **out_session) {
    return guarded(__func__, [&] {
        require(model != nullptr && out_session != nullptr, "model and out_session must not be NULL");
        *out_session = new gpt_session(*model->impl, n_seq);
    });
}

void gpt_session_free(struct gpt_session *session) { delete session; }

gpt_status gpt_session_reset(struct gpt_session *session) {
    return guarded(__func__, [&] {
        require(session != nullptr, "session must not be NULL");
        session->impl.reset();
    });
}

gpt_status gpt_session_position(const struct gpt_session *session, int32_t *out_position) {
    return gpt_session_position_seq(session, 0, out_position);
}

gpt_status gpt_session_position_seq(const struct gpt_session *session, int32_t seq, int32_t *out_position) {
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
        session->impl.decode(token, logits);
    });
}

gpt_status gpt_session_decode_batch(struct gpt_session *session, const gpt_token *tokens, float *logits) {
    return guarded(__func__, [&] {
        require(session != nullptr && tokens != nullptr && logits != nullptr,
                "session, tokens and logits must not be NULL");
        session->impl.decode_batch(tokens, logits);
    });
}

struct gpt_generate_params gpt_generate_default_params(void) {
    gpt_generate_params p{};
    p.max_new_tokens = 64;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.seed = 0;
    p.stop_token = -1;
    p.on_token = nullptr;
    p.user_data = nullptr;
    return p;
}

gpt_status gpt_session_generate(struct gpt_session *session, const gpt_token *prompt, int32_t n_prompt,
                                const struct gpt_generate_params *params, gpt_token *out_tokens, int32_t capacity,
                                int32_t *out_count) {
    return guarded(__func__, [&] {
        require(session != nullptr && prompt != nullptr && params != nullptr && out_tokens != nullptr &&
                    out_count != nullptr,
                "session, prompt, params, out_tokens and out_count must not be NULL");
        if (params->max_new_tokens <= 0) gpt::fail(GPT_ERR_INVALID_ARGUMENT, "max_new_tokens must be > 0");
        if (capacity < params->max_new_tokens)
            gpt::fail(GPT_ERR_BUFFER_TOO_SMALL, "out_tokens holds " + std::to_string(capacity) +
                                                    " tokens, max_new_tokens is " +
                                                    std::to_string(params->max_new_tokens));
        const std::vector<gpt_token> generated = session->impl.generate(prompt, n_prompt, *params);
        std::copy(generated.begin(), generated.end(), out_tokens);
        *out_count = static_cast<int32_t>(generated.size());
    });
}

}  // extern "C"
