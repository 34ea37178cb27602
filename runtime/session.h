// session.h — one sequence over a shared model: its KV cache, position and generation loop.
#pragma once

#include <ATen/Tensor.h>

#include <vector>

#include "gpt_runtime.h"
#include "model.h"

namespace gpt {

class Session {
public:
    explicit Session(Model &model);
    ~Session();
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;

    void reset() { position_ = 0; }
    int32_t position() const { return position_; }

    // `logits` receives vocab_size floats.
    void prefill(const gpt_token *tokens, int32_t n_tokens, float *logits);
    void decode(gpt_token token, float *logits);

    // The generated tokens (at most params.max_new_tokens). Memory grows with the
    // tokens produced, not with the requested maximum.
    std::vector<gpt_token> generate(const gpt_token *prompt, int32_t n_prompt, const gpt_generate_params &params);

private:
    void check_token(gpt_token token) const;
    void check_prompt_length(int32_t n_tokens) const;
    void copy_logits(const at::Tensor &logits, float *out) const;

    Model &model_;
    at::Tensor kv_;  // (n_layer, 2, 1, n_head, block_size, head_dim)
    int32_t position_ = 0;
};

}  // namespace gpt

struct gpt_session {
    explicit gpt_session(gpt::Model &m) : impl(m) {}
    gpt::Session impl;
};
