// session.cpp — prefill/decode with bounds checks, and the sampling loop.
#include "session.h"

#include <ATen/ATen.h>

#include <vector>

#include "error.h"
#include "sampler.h"

namespace gpt {

Session::Session(Model &model) : model_(model), kv_(model.new_kv_cache(1)) { ++model_.live_sessions(); }

Session::~Session() { --model_.live_sessions(); }

void Session::check_token(gpt_token token) const {
    const int32_t vocab = model_.config().vocab_size;
    if (token < 0 || token >= vocab)
        fail(GPT_ERR_OUT_OF_RANGE,
             "token id " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
}

void Session::copy_logits(const at::Tensor &logits, float *out) const {
    const int64_t vocab = model_.config().vocab_size;
    const at::Tensor row = logits.select(0, 0).slice(0, 0, vocab).to(at::kCPU, at::kFloat).contiguous();
    std::copy_n(row.data_ptr<float>(), vocab, out);
}

// Before anything is read or allocated for it: the prompt's length is checked
// against the manifest's context, so a huge n_tokens never touches memory.
void Session::check_prompt_length(int32_t n_tokens) const {
    const int32_t block = model_.config().block_size;
    if (n_tokens <= 0) fail(GPT_ERR_INVALID_ARGUMENT, "a prompt needs at least one token");
    if (n_tokens > block)
        fail(GPT_ERR_OUT_OF_RANGE, "prompt of " + std::to_string(n_tokens) + " tokens exceeds the context of " +
                                       std::to_string(block) + ": shorten it");
}

void Session::prefill(const gpt_token *tokens, int32_t n_tokens, float *logits) {
    check_prompt_length(n_tokens);
    std::vector<int64_t> ids(tokens, tokens + n_tokens);
    for (gpt_token t : ids) check_token(static_cast<gpt_token>(t));
    const at::Tensor idx = at::tensor(ids, at::kLong).view({1, n_tokens}).to(model_.device());
    position_ = 0;  // a failed prefill leaves the session empty, never half-filled
    const at::Tensor out = model_.prefill(idx, kv_);
    position_ = n_tokens;
    copy_logits(out, logits);
}

void Session::decode(gpt_token token, float *logits) {
    check_token(token);
    if (position_ == 0) fail(GPT_ERR_INVALID_ARGUMENT, "decode needs a prefilled sequence: call prefill first");
    if (position_ >= model_.config().block_size)
        fail(GPT_ERR_OUT_OF_RANGE, "the context of " + std::to_string(model_.config().block_size) +
                                       " tokens is full: reset the session or start a shorter sequence");
    const auto opts = at::TensorOptions().dtype(at::kLong).device(model_.device());
    const at::Tensor idx = at::full({1, 1}, token, opts);
    const at::Tensor pos = at::full({1}, position_, opts);
    const at::Tensor out = model_.decode(idx, pos, kv_);
    ++position_;
    copy_logits(out, logits);
}

std::vector<gpt_token> Session::generate(const gpt_token *prompt, int32_t n_prompt, const gpt_generate_params &params) {
    if (params.max_new_tokens <= 0) fail(GPT_ERR_INVALID_ARGUMENT, "max_new_tokens must be > 0");
    if (params.top_k < 0 || !(params.top_p > 0.0f && params.top_p <= 1.0f) || !(params.temperature >= 0.0f))
        fail(GPT_ERR_INVALID_ARGUMENT, "need temperature >= 0, top_k >= 0 and 0 < top_p <= 1");
    check_prompt_length(n_prompt);
    const int32_t block = model_.config().block_size;
    std::vector<float> logits(static_cast<size_t>(model_.config().vocab_size));
    Sampler sampler(params.temperature, params.top_k, params.top_p, params.seed);
    std::vector<gpt_token> history(prompt, prompt + n_prompt);
    prefill(prompt, n_prompt, logits.data());
    std::vector<gpt_token> out;
    while (true) {
        const gpt_token next = sampler.sample(logits.data(), model_.config().vocab_size);
        out.push_back(next);
        const auto count = static_cast<int32_t>(out.size());
        history.push_back(next);
        if (params.on_token != nullptr && !params.on_token(next, params.user_data))
            fail(GPT_ERR_ABORTED,
                 "generation stopped by the token callback after " + std::to_string(count) + " tokens");
        if (count == params.max_new_tokens || next == params.stop_token) break;
        if (position_ < block) {
            decode(next, logits.data());
        } else {
            // Context full: keep the most recent half window and continue from it,
            // one prefill instead of a recompute per token.
            const int32_t keep = std::max(1, block / 2);
            prefill(history.data() + history.size() - keep, keep, logits.data());
        }
    }
    return out;
}

}  // namespace gpt
