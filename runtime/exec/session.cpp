// session.cpp — prefill/decode of each sequence with bounds checks, batched prefill and decode, the sampling loop.
#include "exec/session.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>
#include <c10/core/StreamGuard.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "exec/device_sampling.h"
#include "text/stop_strings.h"
#include "text/utf8.h"

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

// Allocated on the session's stream, the only one that uses it: its memory is reused only
// after the session's last step there.
at::Tensor new_cache(const Model &model, int32_t n_seq, const SessionStream *stream) {
    const c10::OptionalStreamGuard on_stream(stream ? std::optional<c10::Stream>(stream->get()) : std::nullopt);
    return model.new_kv_cache(n_seq);
}

}  // namespace

Session::Session(Model &model, int32_t n_seq) : model_(model), positions_(checked_n_seq(model, n_seq), 0) {
    if (model.device().is_cuda()) stream_ = std::make_unique<SessionStream>(model.device());
    kv_ = new_cache(model, n_seq, stream_.get());
    if (model.cuda_graphs()) captured_ = std::make_unique<CapturedDecode>(model, kv_, stream_->get());
}

std::optional<c10::Stream> Session::stream() const {
    return stream_ ? std::optional<c10::Stream>(stream_->get()) : std::nullopt;
}

Session::~Session() = default;

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
    const int64_t vocab = model_.config().vocab_size;
    if (!logits.is_cpu() || logits.scalar_type() != at::kBFloat16 || logits.dim() != 2 || logits.stride(1) != 1)
        return logits.slice(1, 0, vocab).to(at::kCPU, at::kFloat).contiguous();
    // A bf16 value is the high half of its float: a shift each, in a loop the compiler vectorizes. torch's
    // conversion took 44–69 µs of a batch-1 step for one row of 50257 values, this 14 µs.
    at::Tensor out = at::empty({logits.size(0), vocab}, logits.options().dtype(at::kFloat));
    for (int64_t row = 0; row < logits.size(0); ++row) {
        const auto *bits = static_cast<const uint16_t *>(logits.data_ptr()) + row * logits.stride(0);
        float *to = out.data_ptr<float>() + row * vocab;
        for (int64_t i = 0; i < vocab; ++i) {
            const uint32_t wide = static_cast<uint32_t>(bits[i]) << 16;
            std::memcpy(to + i, &wide, sizeof(float));
        }
    }
    return out;
}

// Before anything is read or allocated for it: the prompt's length is checked
// against the manifest's context, so a huge n_tokens never touches memory.
void Session::check_prompt_length(int32_t n_tokens, int32_t seq) const {
    const int32_t block = model_.config().block_size;
    if (n_tokens <= 0) fail(GPT_ERR_INVALID_ARGUMENT, label(seq) + "a prompt needs at least one token");
    if (n_tokens > block)
        fail(GPT_ERR_OUT_OF_RANGE, label(seq) + "prompt of " + std::to_string(n_tokens) +
                                       " tokens exceeds the context of " + std::to_string(block) + ": shorten it");
}

void Session::check_prompt(const Prompt &prompt) const {
    check_prompt_length(prompt.n_tokens, prompt.seq);
    for (int32_t i = 0; i < prompt.n_tokens; ++i) check_token(prompt.tokens[i], prompt.seq);
}

void Session::prefill(int32_t seq, const gpt_token *tokens, int32_t n_tokens, float *logits) {
    check_seq(seq);
    const Prompt prompt{seq, tokens, n_tokens, logits};
    check_prompt(prompt);
    on_device("prefill", [&] { run_prefill({prompt}); });
}

void Session::prefill_batch(const gpt_token *const *prompts, const int32_t *n_tokens, float *logits) {
    const int64_t vocab = model_.config().vocab_size;
    std::vector<Prompt> given;
    for (int32_t seq = 0; seq < n_seq(); ++seq) {
        if (n_tokens[seq] == 0) continue;
        if (prompts[seq] == nullptr) fail(GPT_ERR_INVALID_ARGUMENT, label(seq) + "the prompt is NULL");
        given.push_back({seq, prompts[seq], n_tokens[seq], logits + seq * vocab});
        check_prompt(given.back());
    }
    if (given.empty()) fail(GPT_ERR_INVALID_ARGUMENT, "every n_tokens is 0: no sequence to prefill");
    on_device("prefill", [&] { run_prefill(given); });
}

// Prompts (checked, in sequence order) of adjacent sequences share one pass of the
// prefill graph, padded to the longest: a shorter row's cache past its prompt then
// holds the padding's keys and values, which nothing reads (a step masks positions
// past its own and writes its own before reading it). Its logits come from one
// decode step of its last prompt token, shared by every shorter row.
void Session::run_prefill(const std::vector<Prompt> &prompts) {
    const int64_t vocab = model_.config().vocab_size;
    for (const Prompt &p : prompts) positions_[static_cast<size_t>(p.seq)] = 0;
    try {
        std::vector<gpt_token> last_tokens(positions_.size(), GPT_TOKEN_NONE);  // the shorter rows'
        for (size_t first = 0, end = 0; first < prompts.size(); first = end) {  // a run of adjacent sequences
            const int32_t first_seq = prompts[first].seq;
            int64_t longest = 0;
            for (end = first; end < prompts.size() && prompts[end].seq - first_seq == static_cast<int32_t>(end - first);
                 ++end)
                longest = std::max<int64_t>(longest, prompts[end].n_tokens);
            const auto rows = static_cast<int64_t>(end - first);
            std::vector<int64_t> ids(static_cast<size_t>(rows * longest), 0);  // padded with token 0
            for (int64_t row = 0; row < rows; ++row) {
                const Prompt &p = prompts[first + static_cast<size_t>(row)];
                std::copy_n(p.tokens, p.n_tokens, ids.begin() + row * longest);
            }
            const at::Tensor idx = at::tensor(ids, at::kLong).view({rows, longest}).to(model_.device());
            const at::Tensor out = host_logits(model_.prefill(idx, kv_.narrow(2, first_seq, rows)));
            for (int64_t row = 0; row < rows; ++row) {
                const Prompt &p = prompts[first + static_cast<size_t>(row)];
                if (p.n_tokens == longest) {
                    std::copy_n(out.data_ptr<float>() + row * vocab, vocab, p.logits);
                    positions_[static_cast<size_t>(p.seq)] = p.n_tokens;
                } else {
                    last_tokens[static_cast<size_t>(p.seq)] = p.tokens[p.n_tokens - 1];
                    positions_[static_cast<size_t>(p.seq)] = p.n_tokens - 1;
                }
            }
        }
        if (std::any_of(last_tokens.begin(), last_tokens.end(), [](gpt_token t) { return t != GPT_TOKEN_NONE; })) {
            int32_t first = 0;
            const at::Tensor out = step(last_tokens.data(), &first);
            for (const Prompt &p : prompts) {
                if (last_tokens[static_cast<size_t>(p.seq)] == GPT_TOKEN_NONE) continue;
                std::copy_n(out.data_ptr<float>() + (p.seq - first) * vocab, vocab, p.logits);
                positions_[static_cast<size_t>(p.seq)] = p.n_tokens;
            }
        }
    } catch (...) {
        for (const Prompt &p : prompts) positions_[static_cast<size_t>(p.seq)] = 0;  // empty, never half-filled
        throw;
    }
}

void Session::decode(int32_t seq, gpt_token token, float *logits) {
    check_seq(seq);
    check_token(token, seq);  // GPT_TOKEN_NONE is no token here
    std::vector<gpt_token> tokens(positions_.size(), GPT_TOKEN_NONE);
    tokens[static_cast<size_t>(seq)] = token;
    check_step(tokens.data());
    int32_t first = 0;
    const at::Tensor all = on_device("decode", [&] { return step(tokens.data(), &first); });
    ++positions_[static_cast<size_t>(seq)];
    const int64_t vocab = model_.config().vocab_size;
    std::copy_n(all.data_ptr<float>() + (seq - first) * vocab, vocab, logits);
}

void Session::check_step(const gpt_token *tokens) const {
    const int32_t block = model_.config().block_size;
    bool any = false;
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
        any = true;
    }
    if (!any) fail(GPT_ERR_INVALID_ARGUMENT, "every token is GPT_TOKEN_NONE: no sequence to decode");
}

void Session::decode_batch(const gpt_token *tokens, float *logits) {
    check_step(tokens);
    int32_t first = 0;
    const at::Tensor all = on_device("decode", [&] { return step(tokens, &first); });
    const int64_t vocab = model_.config().vocab_size;
    for (int32_t row = 0; row < all.size(0); ++row) {
        const int32_t seq = first + row;
        if (tokens[seq] == GPT_TOKEN_NONE) continue;
        ++positions_[static_cast<size_t>(seq)];
        std::copy_n(all.data_ptr<float>() + row * vocab, vocab, logits + seq * vocab);
    }
}

void Session::decode_sample_batch(const gpt_token *tokens, Sampler *const *samplers, gpt_token *out_tokens,
                                  float *logits) {
    check_step(tokens);
    for (int32_t seq = 0; seq < n_seq(); ++seq) {
        if (tokens[seq] == GPT_TOKEN_NONE) continue;
        if (samplers[seq] == nullptr)
            fail(GPT_ERR_INVALID_ARGUMENT, label(seq) + "a sequence that steps needs a sampler");
        samplers[seq]->check_vocab(model_.config().vocab_size);
        for (int32_t other = 0; other < seq; ++other)  // each draws from its own random stream
            if (tokens[other] != GPT_TOKEN_NONE && samplers[other] == samplers[seq])
                fail(GPT_ERR_INVALID_ARGUMENT, label(seq) + "has the sampler of sequence " + std::to_string(other) +
                                                   ": each sequence needs its own");
    }
    const SampledRows chosen = on_device("decode", [&] {
        at::Tensor greedy;
        int32_t first = 0;
        const at::Tensor all = device_step(tokens, &first, &greedy);
        const auto rows = static_cast<int32_t>(all.size(0));
        const int32_t vocab = model_.config().vocab_size;
        std::vector<Sampler *> stepping(static_cast<size_t>(rows), nullptr);
        for (int32_t row = 0; row < rows; ++row)
            if (tokens[first + row] != GPT_TOKEN_NONE) stepping[static_cast<size_t>(row)] = samplers[first + row];
        // On the CPU the logits are in host memory already and the host sampler needs no sort;
        // on a GPU they stay there and only the ids come back.
        const bool on_host = !all.is_cuda();
        const at::Tensor host = on_host || logits != nullptr ? host_logits(all) : at::Tensor();
        SampledRows sampled = on_host ? sample_rows(stepping.data(), rows, host.data_ptr<float>(), vocab)
                                      : sample_on_device(all, vocab, stepping, greedy);
        // Only now is the step taken (whatever sampling says of its logits): a failure before this point
        // leaves the positions as they were, and a retry writes the same cache entries again.
        for (int32_t row = 0; row < rows; ++row) {
            const int32_t seq = first + row;
            if (tokens[seq] == GPT_TOKEN_NONE) continue;
            ++positions_[static_cast<size_t>(seq)];
            if (logits != nullptr)
                std::copy_n(host.data_ptr<float>() + int64_t{row} * vocab, vocab, logits + int64_t{seq} * vocab);
        }
        // By sequence from here: the rows begin at `first`.
        sampled.tokens.insert(sampled.tokens.begin(), static_cast<size_t>(first), GPT_TOKEN_NONE);
        for (int32_t &row : sampled.refused) row += first;
        return sampled;
    });
    std::fill(out_tokens, out_tokens + n_seq(), GPT_TOKEN_NONE);
    std::copy(chosen.tokens.begin(), chosen.tokens.end(), out_tokens);
    if (!chosen.refused.empty()) fail_unsampled(chosen.refused);
}

void Session::fail_unsampled(const std::vector<int32_t> &seqs) const {
    std::string which;
    for (const int32_t seq : seqs) which += (which.empty() ? "" : ", ") + std::to_string(seq);
    fail(GPT_ERR_NON_FINITE, (n_seq() == 1 ? std::string("the") : "sequence " + which + ": the") +
                                 " model's logits hold NaN or +inf, or are -inf for every token; nothing can be "
                                 "sampled from them" +
                                 (n_seq() == 1 ? "" : " (the other sequences' tokens are drawn)"));
}

// One decode pass over the rows from the first stepping sequence to the last (decode
// costs about the same for one row or several), tokens already checked: a request alone
// in a late slot pays neither for the rows before it nor for how far their caches reach.
// A row inside that range that sits out gets a harmless write at a cache position it has
// not filled yet, or at the last one of a full sequence, which can only be prefilled
// again. A captured step starts at row 0 (its graphs are captured per row count over the
// cache's first rows). Returns the rows' logits on the device; positions are the
// caller's to advance.
at::Tensor Session::device_step(const gpt_token *tokens, int32_t *first, at::Tensor *greedy) {
    const int32_t block = model_.config().block_size;
    const bool captured = captured_ && model_.cuda_graphs();  // off for good once a capture failed
    int32_t begin = -1, end = 0;
    for (int32_t seq = 0; seq < n_seq(); ++seq) {
        if (tokens[seq] == GPT_TOKEN_NONE) continue;
        if (begin < 0) begin = seq;
        end = seq + 1;
    }
    if (captured || begin < 0) begin = 0;
    *first = begin;
    const int32_t rows = end - begin;
    std::vector<int64_t> ids(static_cast<size_t>(rows)), pos(static_cast<size_t>(rows));
    for (int32_t row = 0; row < rows; ++row) {
        const int32_t seq = begin + row;
        ids[static_cast<size_t>(row)] = tokens[seq] != GPT_TOKEN_NONE ? tokens[seq] : 0;
        pos[static_cast<size_t>(row)] = std::min(positions_[static_cast<size_t>(seq)], block - 1);
    }
    // The step reads the cache up to the furthest row's position, not the whole context.
    const int64_t span = *std::max_element(pos.begin(), pos.end()) + 1;
    if (captured) {
        CapturedDecode::Step step = captured_->step(ids, pos, span);
        if (greedy != nullptr) *greedy = step.greedy;
        if (step.logits.defined()) return step.logits;
    }
    const at::Tensor idx = at::tensor(ids, at::kLong).view({rows, 1}).to(model_.device());
    return model_.decode(idx, at::tensor(pos, at::kLong).to(model_.device()), kv_.narrow(2, begin, rows), span);
}

Session::Generated Session::generate(const gpt_token *prompt, int32_t n_prompt, const gpt_generate_params &params) {
    if (params.max_new_tokens <= 0) fail(GPT_ERR_INVALID_ARGUMENT, "max_new_tokens must be > 0");
    check_prompt_length(n_prompt);
    Sampler sampler(params.temperature, params.top_k, params.top_p, params.seed);
    // The stop strings' text: the tokens' bytes as complete characters, as a detokenizer gives them out.
    if (params.n_stop_strings < 0 || (params.n_stop_strings > 0 && params.stop_strings == nullptr))
        fail(GPT_ERR_INVALID_ARGUMENT, "stop_strings must hold n_stop_strings entries");
    std::vector<std::string> stop_list;
    for (int32_t i = 0; i < params.n_stop_strings; ++i) {
        if (params.stop_strings[i] == nullptr)
            fail(GPT_ERR_INVALID_ARGUMENT, "stop string " + std::to_string(i) + " is NULL");
        stop_list.emplace_back(params.stop_strings[i]);
    }
    StopStrings stop(std::move(stop_list));
    if (!stop.empty() && model_.tokenizer().kind() == "none")
        fail(GPT_ERR_INVALID_ARGUMENT, "stop strings need a text tokenizer; this artifact has none");
    Utf8Stream text;

    const int32_t block = model_.config().block_size;
    const int32_t vocab = model_.config().vocab_size;
    std::vector<float> logits(static_cast<size_t>(vocab));
    std::vector<gpt_token> history(prompt, prompt + n_prompt);
    prefill(0, prompt, n_prompt, logits.data());
    Generated result;
    std::vector<gpt_token> &out = result.tokens;
    const gpt_token eos = model_.tokenizer().eos();  // -1 when there is none: never sampled
    // Decode steps sample where the logits are; their logits come back only for the log-probabilities.
    std::vector<gpt_token> step_tokens(positions_.size(), GPT_TOKEN_NONE), drawn(positions_.size());
    std::vector<Sampler *> step_samplers(positions_.size(), nullptr);
    step_samplers[0] = &sampler;
    float *step_logits = params.token_logprobs != nullptr ? logits.data() : nullptr;
    gpt_token next = sampler.sample(logits.data(), vocab);
    while (true) {
        if (params.stop_at_eos && next == eos) break;  // the end of the text, not a part of it
        out.push_back(next);
        if (params.token_logprobs != nullptr) {
            gpt_token_logprob chosen{};
            log_probabilities(logits.data(), vocab, next, 0, &chosen);
            result.logprobs.push_back(chosen.logprob);
        }
        const auto count = static_cast<int32_t>(out.size());
        history.push_back(next);
        if (params.on_token != nullptr && !params.on_token(next, params.user_data)) {
            result.cancelled = true;
            break;
        }
        if (count == params.max_new_tokens || next == params.stop_token) break;
        if (!stop.empty()) {
            stop.push(text.push(model_.tokenizer().token_bytes(next)));
            if (stop.stopped() >= 0) break;
        }
        if (positions_[0] < block) {
            step_tokens[0] = next;
            decode_sample_batch(step_tokens.data(), step_samplers.data(), drawn.data(), step_logits);
            next = drawn[0];
        } else {
            // Context full: keep the most recent half window and continue from it,
            // one prefill instead of a recompute per token.
            const int32_t keep = std::max(1, block / 2);
            prefill(0, history.data() + history.size() - keep, keep, logits.data());
            next = sampler.sample(logits.data(), vocab);
        }
    }
    return result;
}

}  // namespace gpt
