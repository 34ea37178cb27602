// session.h — sequences over a shared model: their KV cache, positions and the generation loop.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "exec/captured_decode.h"
#include "exec/device_health.h"
#include "exec/model.h"
#include "exec/sampler.h"
#include "exec/session_stream.h"
#include "gpt_runtime.h"

namespace gpt {

// n_seq independent sequences in one KV cache, so one decode call steps them all
// (decode reads every weight once per call whatever the batch). The single-sequence
// calls (prefill without a sequence, decode, generate) act on sequence 0.
// On a GPU a session has a CUDA stream of its own, where its cache lives and all its
// work runs: sessions of one model run at once (as many as the model's num_runners),
// and its decode steps run as CUDA graphs unless the model says not to.
class Session {
public:
    Session(Model &model, int32_t n_seq);
    ~Session();
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;

    int32_t n_seq() const { return static_cast<int32_t>(positions_.size()); }
    int32_t vocab_size() const { return model_.config().vocab_size; }
    void reset();  // every sequence
    int32_t position(int32_t seq) const;

    // `logits` receives vocab_size floats.
    void prefill(int32_t seq, const gpt_token *tokens, int32_t n_tokens, float *logits);
    // prompts[n_seq], n_tokens[n_seq]; n_tokens 0 leaves that sequence (and its logits row) as it is.
    // `logits` receives n_seq rows of vocab_size floats.
    void prefill_batch(const gpt_token *const *prompts, const int32_t *n_tokens, float *logits);
    // One step of sequence `seq` alone; `logits` receives its row, vocab_size floats.
    void decode(int32_t seq, gpt_token token, float *logits);
    // tokens[n_seq]; GPT_TOKEN_NONE leaves that sequence (and its logits row) as it is.
    // `logits` receives n_seq rows of vocab_size floats.
    void decode_batch(const gpt_token *tokens, float *logits);
    // decode_batch, then sequence i's next token drawn by samplers[i] into out_tokens[i]
    // (GPT_TOKEN_NONE for a sequence that sat out), where the logits are: on a GPU only the
    // ids come back. `logits` (NULL: not wanted) receives the rows as decode_batch writes them.
    // A sequence whose logits cannot be sampled gets GPT_TOKEN_NONE, its sampler untouched, and the
    // call throws GPT_ERR_NON_FINITE naming it after the others' tokens are written; the step is taken.
    void decode_sample_batch(const gpt_token *tokens, Sampler *const *samplers, gpt_token *out_tokens, float *logits);

    // One forward over tokens of several sequences at once: sequence i appends n_tokens[i] tokens of tokens[i]
    // (0: it sits out) and, with samplers[i], its next token is drawn after them into out_tokens[i]
    // (GPT_TOKEN_NONE where none is drawn); `logits` (NULL: not wanted) receives the drawn sequences' rows as
    // decode_sample_batch writes them. Decode steps beside prompt pieces, the weights read once for all: with
    // the artifact's mixed graph one call of it; without (or when the tokens exceed it), each sequence's tokens
    // but the drawn last one go in by extend, then one decode_sample_batch step. Refusals as decode_sample_batch.
    void append_sample_batch(const gpt_token *const *tokens, const int32_t *n_tokens, Sampler *const *samplers,
                             gpt_token *out_tokens, float *logits);
    // Tokens the mixed graph takes in one call (0 without it).
    int64_t mixed_capacity() const;

    struct Generated {
        std::vector<gpt_token> tokens;  // at most params.max_new_tokens
        std::vector<float> logprobs;    // one per token, when params.token_logprobs asks for them
        bool cancelled = false;         // the token callback returned false after the last of `tokens`
    };
    // The generated tokens, also when the callback cancels (the C API hands them out with
    // GPT_ERR_ABORTED). Memory grows with the tokens produced, not with the requested maximum.
    Generated generate(const gpt_token *prompt, int32_t n_prompt, const gpt_generate_params &params);

    // Sequences as a cache of their tokens (session_sequences.cpp): what a server needs to reuse a
    // prompt's shared prefix and to prefill a long prompt in pieces between decode steps.
    // Appends `n_tokens` to sequence `seq` (any position, 0 included: then a prefill), in pieces of at most
    // kExtendPiece tokens, the abort callback asked before each; `logits` (NULL: not wanted) receives the
    // last token's. With the artifact's extend graph each piece is one call of it; without, one prefill
    // (at position 0) or a decode step per token. Stopped or failed, the sequence holds the pieces done.
    void extend(int32_t seq, const gpt_token *tokens, int32_t n_tokens, float *logits);
    // Keeps the first n_tokens (0..position) of sequence `seq`.
    void truncate(int32_t seq, int32_t n_tokens);
    // Sequence `dst` becomes the first n_tokens (0..position of src) of sequence `src`, its cache copied.
    void copy(int32_t src, int32_t dst, int32_t n_tokens);
    // Asked before each piece of extend(); returning true stops it (GPT_ERR_ABORTED). NULL: never stops.
    void set_abort_callback(gpt_abort_callback callback, void *user_data);
    static constexpr int32_t kExtendPiece = GPT_EXTEND_PIECE_TOKENS;

private:
    struct Prompt {
        int32_t seq;
        const gpt_token *tokens;
        int32_t n_tokens;
        float *logits;  // vocab_size floats
    };

    void check_seq(int32_t seq) const;
    std::string label(int32_t seq) const;
    void check_token(gpt_token token, int32_t seq = -1) const;
    void check_prompt_length(int32_t n_tokens, int32_t seq = -1) const;
    void check_prompt(const Prompt &prompt) const;
    void run_prefill(const std::vector<Prompt> &prompts);
    // One piece of extend(): checked tokens that fit the context; positions advance only when it ran.
    void extend_piece(int32_t seq, const gpt_token *tokens, int32_t n_tokens, float *logits);
    // Throws what a decode step of `tokens` refuses, before anything runs.
    void check_step(const gpt_token *tokens) const;
    // One step of the rows from the first stepping sequence to the last (from 0 when the step is captured):
    // their logits on the device, row i being sequence *first + i.
    // With `greedy`, also each row's greedy_choice when the step computed it (a captured step), else undefined.
    at::Tensor device_step(const gpt_token *tokens, int32_t *first, at::Tensor *greedy = nullptr);
    at::Tensor step(const gpt_token *tokens, int32_t *first) { return host_logits(device_step(tokens, first)); }
    at::Tensor host_logits(const at::Tensor &logits) const;
    // GPT_ERR_NON_FINITE naming the sequences whose logits nothing could be drawn from.
    [[noreturn]] void fail_unsampled(const std::vector<int32_t> &seqs) const;
    // append_sample_batch's two ways, its arguments checked: the mixed graph's one call, or extend and a step.
    void append_mixed(const gpt_token *const *tokens, const int32_t *n_tokens, Sampler *const *samplers,
                      gpt_token *out_tokens, float *logits);
    void append_by_steps(const gpt_token *const *tokens, const int32_t *n_tokens, Sampler *const *samplers,
                         gpt_token *out_tokens, float *logits);

    // Where the session's work runs: its own CUDA stream (none on the CPU).
    std::optional<c10::Stream> stream() const;
    // Runs `work` on the session's stream. A CUDA fault it meets (in a replayed step, or at the copy
    // that waits for a step) is GPT_ERR_CUDA, a lost context recorded on the model (device_health.h).
    template <typename Work>
    auto on_device(const char *what, Work &&work);

    Model &model_;
    std::unique_ptr<SessionStream> stream_;     // outlives everything allocated on it, below
    at::Tensor kv_;                             // (n_layer, 2, n_seq, n_head, block_size + 1, head_dim)
    std::vector<int32_t> positions_;            // tokens in each sequence's cache
    std::unique_ptr<CapturedDecode> captured_;  // decode steps as CUDA graphs; null when not used
    gpt_abort_callback abort_ = nullptr;
    void *abort_data_ = nullptr;
};

// Defined here for session.cpp and session_sequences.cpp alike.
template <typename Work>
auto Session::on_device(const char *what, Work &&work) {
    const c10::OptionalStreamGuard on_stream(stream());
    try {
        return work();
    } catch (const Error &) {
        throw;
    } catch (const std::exception &) {
        throw_pending_cuda_error(model_.device(), model_.device_health(), what);
        throw;
    }
}

}  // namespace gpt

struct gpt_session {
    gpt_session(std::shared_ptr<gpt::Model> m, int32_t n_seq) : model(std::move(m)), impl(*model, n_seq) {}
    std::shared_ptr<gpt::Model> model;  // declared first, so freed after impl, which uses it
    gpt::Session impl;
};
