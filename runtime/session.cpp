// session.cpp — prefill/decode of each sequence with bounds checks, batched decode, the sampling loop.
#include "session.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

#include "error.h"
#include "sampler.h"

namespace gpt {

namespace {

// Before anything is allocated: the decode graph takes at most max_batch rows.
int32_t checked_n_seq(const Model &model, int32_t n_seq) {
    const int32_t max_batch = model.manifest().decode.max_batch;
    if (n_seq < 1 || n_seq > max_batch)
        fail(GPT_ERR_OUT_OF_RANGE, "a session holds 1 to " + std::to_string(max_batch) +
                                       " sequences (the artifact's max_batch), not " + std::to_string(n_seq));
    return n_seq;
}

}  // namespace

Session::Session(Model &model, int32_t n_seq)
    : model_(model), kv_(model.new_kv_cache(checked_n_seq(model, n_seq))), positions_(n_seq, 0) {
    ++model_.live_sessions();
}

Session::~Session() { --model_.live_sessions(); }

void Session::reset() { std::fill(positions_.begin(), positions_.end(), 0); }

void Session::check_seq(int32_t seq) const {
    if (seq < 0 || seq >= n_seq())
        fail(GPT_ERR_OUT_OF_RANGE,
             "sequence " + std::to_string(seq) + " is outside this session's [0, " + std::to_string(n_seq()) + ")");
}

int32_t Session::position(int32_t seq) const {
    check_seq(seq);
    return positions_[static_cast<size_t>(seq)];
}

// "sequence N: " before a message about one of several sequences; nothing for a single one.
std::string Session::label(int32_t seq) const {
    return seq < 0 || n_seq() == 1 ? std::string() : "sequence " + std::to_string(seq) + ": ";
}

void Session::check_token(gpt_token token, int32_t seq) const {
    const int32_t vocab = model_.config().vocab_size;
    if (token < 0 || token >= vocab)
        fail(GPT_ERR_OUT_OF_RANGE, label(seq) + "token id " + std::to_string(token) +
                                       " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
}

// (rows, padded_vocab) logits on the device -> (rows, vocab_size) contiguous floats on the host.
at::Tensor Session::host_logits(const at::Tensor &logits) const {
    return logits.slice(1, 0, model_.config().vocab_size).to(at::kCPU, at::kFloat).contiguous();
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

void Session::prefill(int32_t seq, const gpt_token *tokens, int32_t n_tokens, float *logits) {
    check_seq(seq);
    check_prompt_length(n_tokens);
    std::vector<int64_t> ids(tokens, tokens + n_tokens);
    for (gpt_token t : ids) check_token(static_cast<gpt_token>(t));
    const at::Tensor idx = at::tensor(ids, at::kLong).view({1, n_tokens}).to(model_.device());
    int32_t &position = positions_[static_cast<size_t>(seq)];
    position = 0;  // a failed prefill leaves the sequence empty, never half-filled
    const at::Tensor out = model_.prefill(idx, kv_.narrow(2, seq, 1));
    position = n_tokens;
    std::copy_n(host_logits(out).data_ptr<float>(), model_.config().vocab_size, logits);
}

void Session::decode(gpt_token token, float *logits) {
    check_token(token);  // GPT_TOKEN_NONE is no token here
    std::vector<gpt_token> tokens(positions_.size(), GPT_TOKEN_NONE);
    tokens[0] = token;
    decode_batch(tokens.data(), logits);  // only sequence 0 steps: only the first row is written
}

// Every row up to the last stepping sequence runs (decode costs about the same
// for one row or many); a row that sits out gets a harmless write at a cache
// position it has not filled yet, or at the last one of a full sequence, which
// can only be prefilled again.
void Session::decode_batch(const gpt_token *tokens, float *logits) {
    const int32_t block = model_.config().block_size;
    int32_t rows = 0;
    for (int32_t seq = 0; seq < n_seq(); ++seq) {
        const gpt_token token = tokens[seq];
        if (token == GPT_TOKEN_NONE) continue;
        check_token(token, seq);
        const int32_t position = positions_[static_cast<size_t>(seq)];
        if (position == 0)
            fail(GPT_ERR_INVALID_ARGUMENT, label(seq) + "decode needs a prefilled sequence: call prefill first");
        if (position >= block)
            fail(GPT_ERR_OUT_OF_RANGE, label(seq) + "the context of " + std::to_string(block) +
                                           " tokens is full: reset the session or start a shorter sequence");
        rows = seq + 1;
    }
    if (rows == 0) fail(GPT_ERR_INVALID_ARGUMENT, "every token is GPT_TOKEN_NONE: no sequence to decode");
    std::vector<int64_t> ids(static_cast<size_t>(rows)), pos(static_cast<size_t>(rows));
    for (int32_t seq = 0; seq < rows; ++seq) {
        const bool steps = tokens[seq] != GPT_TOKEN_NONE;
        ids[static_cast<size_t>(seq)] = steps ? tokens[seq] : 0;
        pos[static_cast<size_t>(seq)] = std::min(positions_[static_cast<size_t>(seq)], block - 1);
    }
    // The step reads the cache up to the furthest row's position, not the whole context.
    const int64_t span = *std::max_element(pos.begin(), pos.end()) + 1;
    const at::Tensor idx = at::tensor(ids, at::kLong).view({rows, 1}).to(model_.device());
    const at::Tensor out =
        model_.decode(idx, at::tensor(pos, at::kLong).to(model_.device()), kv_.narrow(2, 0, rows), span);
    const at::Tensor all = host_logits(out);
    const int64_t vocab = model_.config().vocab_size;
    for (int32_t seq = 0; seq < rows; ++seq) {
        if (tokens[seq] == GPT_TOKEN_NONE) continue;
        ++positions_[static_cast<size_t>(seq)];
        std::copy_n(all.data_ptr<float>() + seq * vocab, vocab, logits + seq * vocab);
    }
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
    prefill(0, prompt, n_prompt, logits.data());
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
        if (positions_[0] < block) {
            decode(next, logits.data());
        } else {
            // Context full: keep the most recent half window and continue from it,
            // one prefill instead of a recompute per token.
            const int32_t keep = std::max(1, block / 2);
            prefill(0, history.data() + history.size() - keep, keep, logits.data());
        }
    }
    return out;
}

}  // namespace gpt
