// session_sequences.cpp — a session's sequences as caches of their tokens: append several tokens (extend),
// keep a prefix (truncate), copy one sequence's prefix into another, and the abort callback of a long extend.
#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.h"
#include "exec/session.h"

namespace gpt {

void Session::set_abort_callback(gpt_abort_callback callback, void *user_data) {
    abort_ = callback;
    abort_data_ = user_data;
}

void Session::extend(int32_t seq, const gpt_token *tokens, int32_t n_tokens, float *logits) {
    check_seq(seq);
    const int32_t block = model_.config().block_size;
    const int32_t position = positions_[static_cast<size_t>(seq)];
    if (n_tokens <= 0) fail(GPT_ERR_INVALID_ARGUMENT, label(seq) + "extend needs at least one token");
    if (n_tokens > block - position)
        fail(GPT_ERR_OUT_OF_RANGE, label(seq) + std::to_string(n_tokens) + " tokens after the " +
                                       std::to_string(position) + " it holds exceed the context of " +
                                       std::to_string(block) + ": truncate the sequence or shorten the prompt");
    for (int32_t i = 0; i < n_tokens; ++i) check_token(tokens[i], seq);
    for (int32_t done = 0; done < n_tokens;) {
        if (abort_ != nullptr && abort_(abort_data_))
            fail(GPT_ERR_ABORTED, label(seq) + "the abort callback stopped extend after " + std::to_string(done) +
                                      " of " + std::to_string(n_tokens) + " tokens; the sequence holds " +
                                      std::to_string(positions_[static_cast<size_t>(seq)]));
        const int32_t piece = std::min(kExtendPiece, n_tokens - done);
        on_device("extend",
                  [&] { extend_piece(seq, tokens + done, piece, done + piece == n_tokens ? logits : nullptr); });
        done += piece;
    }
}

void Session::extend_piece(int32_t seq, const gpt_token *tokens, int32_t n_tokens, float *logits) {
    const int64_t vocab = model_.config().vocab_size;
    const int32_t start = positions_[static_cast<size_t>(seq)];
    std::vector<float> unwanted;  // the prefill and decode paths write logits whether wanted or not
    if (logits == nullptr && (start == 0 || !model_.has_extend())) {
        unwanted.resize(static_cast<size_t>(std::max<int64_t>(vocab * n_seq(), vocab)));
        logits = unwanted.data();
    }
    if (start == 0) return run_prefill({Prompt{seq, tokens, n_tokens, logits}});
    if (model_.has_extend()) {
        const std::vector<int64_t> ids(tokens, tokens + n_tokens);
        const at::Tensor idx = at::tensor(ids, at::kLong).view({1, n_tokens}).to(model_.device());
        const at::Tensor from = at::full({1}, int64_t{start}, at::kLong).to(model_.device());
        const at::Tensor out = model_.extend(idx, from, kv_.narrow(2, seq, 1), int64_t{start} + n_tokens);
        if (logits != nullptr) std::copy_n(host_logits(out).data_ptr<float>(), vocab, logits);
        positions_[static_cast<size_t>(seq)] = start + n_tokens;
        return;
    }
    // An artifact without the extend graph: one decode step per token, the others sitting out.
    std::vector<gpt_token> step_tokens(positions_.size(), GPT_TOKEN_NONE);
    for (int32_t i = 0; i < n_tokens; ++i) {
        step_tokens[static_cast<size_t>(seq)] = tokens[i];
        int32_t first = 0;
        const at::Tensor out = step(step_tokens.data(), &first);
        ++positions_[static_cast<size_t>(seq)];
        if (i + 1 == n_tokens) std::copy_n(out.data_ptr<float>() + (seq - first) * vocab, vocab, logits);
    }
}

void Session::truncate(int32_t seq, int32_t n_tokens) {
    const int32_t position = this->position(seq);
    if (n_tokens < 0 || n_tokens > position)
        fail(GPT_ERR_OUT_OF_RANGE, label(seq) + "cannot keep " + std::to_string(n_tokens) + " tokens of the " +
                                       std::to_string(position) + " it holds");
    positions_[static_cast<size_t>(seq)] = n_tokens;  // the positions past it are rewritten before they are read
}

void Session::copy(int32_t src, int32_t dst, int32_t n_tokens) {
    const int32_t held = position(src);
    check_seq(dst);
    if (src == dst)
        fail(GPT_ERR_INVALID_ARGUMENT, "copy needs two sequences; src and dst are both " + std::to_string(src));
    if (n_tokens < 0 || n_tokens > held)
        fail(GPT_ERR_OUT_OF_RANGE, "cannot copy " + std::to_string(n_tokens) + " tokens of sequence " +
                                       std::to_string(src) + ", which holds " + std::to_string(held));
    if (n_tokens > 0) {
        on_device("copy", [&] {
            // kv_ (n_layer, 2, n_seq, n_head, block_size + 1, head_dim): the first n_tokens positions of one row.
            kv_.narrow(2, dst, 1).narrow(4, 0, n_tokens).copy_(kv_.narrow(2, src, 1).narrow(4, 0, n_tokens));
        });
    }
    positions_[static_cast<size_t>(dst)] = n_tokens;
}

}  // namespace gpt
