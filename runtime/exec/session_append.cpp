// session_append.cpp — several sequences' tokens in one forward (decode steps beside prompt pieces): the mixed
// graph's one call where the artifact has it, else extend for the pieces and one decode step.
#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.h"
#include "exec/session.h"

namespace gpt {

int64_t Session::mixed_capacity() const {
    const std::optional<GraphSpec> &spec = model_.manifest().mixed;
    // The graph's `tokens` dimension (compiler/graphs.py): a step of every row and a context's worth beside it.
    return model_.has_mixed() && spec ? spec->max_batch + model_.config().block_size : 0;
}

void Session::append_sample_batch(const gpt_token *const *tokens, const int32_t *n_tokens, Sampler *const *samplers,
                                  gpt_token *out_tokens, float *logits) {
    const int32_t block = model_.config().block_size;
    int64_t total = 0;
    for (int32_t seq = 0; seq < n_seq(); ++seq) {
        const int32_t n = n_tokens[seq];
        if (n < 0) fail(GPT_ERR_INVALID_ARGUMENT, label(seq) + "n_tokens is " + std::to_string(n));
        if (n == 0) continue;
        if (tokens[seq] == nullptr) fail(GPT_ERR_INVALID_ARGUMENT, label(seq) + "its tokens are NULL");
        const int32_t position = positions_[static_cast<size_t>(seq)];
        if (n > block - position)
            fail(GPT_ERR_OUT_OF_RANGE, label(seq) + std::to_string(n) + " tokens after the " +
                                           std::to_string(position) + " it holds exceed the context of " +
                                           std::to_string(block) + ": truncate the sequence or shorten the prompt");
        for (int32_t i = 0; i < n; ++i) check_token(tokens[seq][i], seq);
        if (Sampler *sampler = samplers[seq]) {
            sampler->check_vocab(model_.config().vocab_size);
            for (int32_t other = 0; other < seq; ++other)  // each draws from its own random stream
                if (n_tokens[other] > 0 && samplers[other] == sampler)
                    fail(GPT_ERR_INVALID_ARGUMENT, label(seq) + "has the sampler of sequence " + std::to_string(other) +
                                                       ": each sequence needs its own");
        }
        total += n;
    }
    if (total == 0) fail(GPT_ERR_INVALID_ARGUMENT, "every n_tokens is 0: no sequence to append to");
    if (total <= mixed_capacity()) return append_mixed(tokens, n_tokens, samplers, out_tokens, logits);
    append_by_steps(tokens, n_tokens, samplers, out_tokens, logits);
}

// Every token a row of the mixed graph, in sequence order; the graph computes logits only for the drawn rows.
// Nothing changes unless the whole call runs (a retry writes the same cache entries again).
void Session::append_mixed(const gpt_token *const *tokens, const int32_t *n_tokens, Sampler *const *samplers,
                           gpt_token *out_tokens, float *logits) {
    std::vector<int64_t> ids, pos, rows, last;
    std::vector<Sampler *> drawing;  // per drawn row
    std::vector<int32_t> drawn_seq;
    for (int32_t seq = 0; seq < n_seq(); ++seq) {
        const int32_t n = n_tokens[seq];
        for (int32_t i = 0; i < n; ++i) {
            ids.push_back(tokens[seq][i]);
            pos.push_back(int64_t{positions_[static_cast<size_t>(seq)]} + i);
            rows.push_back(seq);
        }
        if (n > 0 && samplers[seq] != nullptr) {
            last.push_back(static_cast<int64_t>(ids.size()) - 1);
            drawing.push_back(samplers[seq]);
            drawn_seq.push_back(seq);
        }
    }
    if (last.empty()) last.push_back(0);  // the graph returns at least one row: here none is drawn
    const int64_t span = *std::max_element(pos.begin(), pos.end()) + 1;
    const int32_t vocab = model_.config().vocab_size;
    const SampledRows sampled = on_device("append", [&] {
        const auto n = static_cast<int64_t>(ids.size());
        const c10::Device device = model_.device();
        const at::Tensor out =
            model_.mixed(at::tensor(ids, at::kLong).view({n, 1}).to(device), at::tensor(pos, at::kLong).to(device),
                         at::tensor(rows, at::kLong).to(device), at::tensor(last, at::kLong).to(device), kv_, span);
        const at::Tensor host = host_logits(out);
        SampledRows drawn;
        if (!drawing.empty())
            drawn = sample_rows(drawing.data(), static_cast<int32_t>(drawing.size()), host.data_ptr<float>(), vocab);
        for (int32_t seq = 0; seq < n_seq(); ++seq) positions_[static_cast<size_t>(seq)] += n_tokens[seq];
        if (logits != nullptr)
            for (size_t row = 0; row < drawn_seq.size(); ++row)
                std::copy_n(host.data_ptr<float>() + static_cast<int64_t>(row) * vocab, vocab,
                            logits + int64_t{drawn_seq[row]} * vocab);
        return drawn;
    });
    std::fill(out_tokens, out_tokens + n_seq(), GPT_TOKEN_NONE);
    for (size_t row = 0; row < drawn_seq.size(); ++row) out_tokens[drawn_seq[row]] = sampled.tokens[row];
    std::vector<int32_t> refused;
    for (const int32_t row : sampled.refused) refused.push_back(drawn_seq[static_cast<size_t>(row)]);
    if (!refused.empty()) fail_unsampled(refused);
}

// Without the mixed graph: each sequence's tokens but a drawn last one by extend, then those last ones as one
// decode step (a sequence whose one token is its first is prefilled, its logits drawn from here).
void Session::append_by_steps(const gpt_token *const *tokens, const int32_t *n_tokens, Sampler *const *samplers,
                              gpt_token *out_tokens, float *logits) {
    const int32_t vocab = model_.config().vocab_size;
    std::vector<gpt_token> step(static_cast<size_t>(n_seq()), GPT_TOKEN_NONE);
    std::vector<int32_t> first_tokens;
    for (int32_t seq = 0; seq < n_seq(); ++seq) {
        const int32_t n = n_tokens[seq];
        if (n == 0) continue;
        const bool draws = samplers[seq] != nullptr;
        if (draws && n == 1 && positions_[static_cast<size_t>(seq)] == 0) {
            first_tokens.push_back(seq);
            continue;
        }
        const int32_t before = draws ? n - 1 : n;
        if (before > 0) extend(seq, tokens[seq], before, nullptr);
        if (draws) step[static_cast<size_t>(seq)] = tokens[seq][n - 1];
    }
    std::fill(out_tokens, out_tokens + n_seq(), GPT_TOKEN_NONE);
    std::vector<int32_t> refused;
    for (const int32_t seq : first_tokens) {
        std::vector<float> row(static_cast<size_t>(vocab));
        extend(seq, tokens[seq], 1, row.data());
        Sampler *sampler = samplers[seq];
        const SampledRows drawn = sample_rows(&sampler, 1, row.data(), vocab);
        out_tokens[seq] = drawn.tokens.at(0);
        if (!drawn.refused.empty()) refused.push_back(seq);
        if (logits != nullptr) std::copy(row.begin(), row.end(), logits + int64_t{seq} * vocab);
    }
    if (std::any_of(step.begin(), step.end(), [](gpt_token t) { return t != GPT_TOKEN_NONE; })) {
        std::vector<gpt_token> stepped(static_cast<size_t>(n_seq()), GPT_TOKEN_NONE);
        try {
            decode_sample_batch(step.data(), samplers, stepped.data(), logits);
        } catch (const Error &e) {  // refused rows come back GPT_TOKEN_NONE; the others are drawn
            if (e.status() != GPT_ERR_NON_FINITE) throw;
            for (int32_t seq = 0; seq < n_seq(); ++seq)
                if (step[static_cast<size_t>(seq)] != GPT_TOKEN_NONE &&
                    stepped[static_cast<size_t>(seq)] == GPT_TOKEN_NONE)
                    refused.push_back(seq);
        }
        for (int32_t seq = 0; seq < n_seq(); ++seq)
            if (step[static_cast<size_t>(seq)] != GPT_TOKEN_NONE) out_tokens[seq] = stepped[static_cast<size_t>(seq)];
    }
    std::sort(refused.begin(), refused.end());
    if (!refused.empty()) fail_unsampled(refused);
}

}  // namespace gpt
