// scheduler_step.cpp — the scheduler's decode steps and what comes of them: a step of the running streams
// (sampled where the logits are), the same step with this round's prompt tokens beside it, and each drawn
// token delivered to its request.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

#include "metrics.h"
#include "scheduling/scheduler.h"
#include "scheduling/scheduler_slot.h"

namespace server {

// Whether a request that takes part in the next step asked for log-probabilities (a step that draws where the
// logits are cannot give them: such rounds take the calls that hand the logits back).
bool Scheduler::logprobs_wanted() const {
    return std::any_of(slots_.begin(), slots_.end(), [](const Slot &s) {
        return s.job && (s.pending != GPT_TOKEN_NONE || s.prefilling) && s.job->spec().logprobs >= 0;
    });
}

// One decode step of the running streams with this round's prompt tokens beside them, one pass of the
// artifact's mixed graph (gpt_session_append_sample_batch): up to the prefill budget of prompt tokens, the longest
// waiting prompt first, each from where its cache ends. A prompt whose last token rides in the step draws its first
// token with the streams' next ones. A piece so costs the compute of its tokens, not a call of its own that reads every
// weight again, and the streams' next token waits for no more than the budget's tokens.
void Scheduler::step_with_prompts() {
    const size_t n = slots_.size();
    std::vector<const gpt_token *> tokens(n, nullptr);
    std::vector<int32_t> n_tokens(n, 0);
    std::vector<gpt_sampler *> samplers(n, nullptr);
    std::vector<int> rows;
    for (size_t seq = 0; seq < n; ++seq) {  // the streams' next tokens
        Slot &slot = slots_[seq];
        step_tokens_[seq] = std::exchange(slot.pending, GPT_TOKEN_NONE);
        if (step_tokens_[seq] == GPT_TOKEN_NONE) continue;
        tokens[seq] = &step_tokens_[seq];
        n_tokens[seq] = 1;
        samplers[seq] = slot.sampler;
        rows.push_back(static_cast<int>(seq));
    }
    size_t budget = prefill_budget_;
    for (const size_t seq : prefill_order()) {  // then prompt pieces, the longest waiting first
        Slot &slot = slots_[seq];
        const size_t done = slot.cached.size();
        if (tokens[seq] != nullptr || budget == 0 || done >= slot.feed.size()) continue;
        const size_t piece = std::min(slot.feed.size() - done, budget);
        budget -= piece;
        tokens[seq] = slot.feed.data() + done;
        n_tokens[seq] = static_cast<int32_t>(piece);
        if (done + piece == slot.feed.size()) samplers[seq] = slot.sampler;  // its last piece: draws its first token
        rows.push_back(static_cast<int>(seq));
    }
    if (options_.metrics)
        options_.metrics->observe_batch_size(
            static_cast<double>(std::count_if(samplers.begin(), samplers.end(), [](gpt_sampler *s) { return s; })));
    std::vector<gpt_token> drawn(n, GPT_TOKEN_NONE);
    const gpt_status s = gpt_session_append_sample_batch(session_, tokens.data(), n_tokens.data(), samplers.data(),
                                                         drawn.data(), nullptr, 0);
    if (s != GPT_OK && s != GPT_ERR_NON_FINITE) return fail_all(rows, s);
    const std::string refused = s == GPT_OK ? std::string() : runtime_error_text(s);  // names the rows refused
    for (int seq : rows) {
        Slot &slot = slots_[static_cast<size_t>(seq)];
        const auto index = static_cast<size_t>(seq);
        slot.cached.insert(slot.cached.end(), tokens[index], tokens[index] + n_tokens[index]);
        if (slot.prefilling) {
            if (options_.metrics && slot.generated == 0)  // a prompt's, not a refill's window
                options_.metrics->count_prompt_tokens("step", static_cast<uint64_t>(n_tokens[index]));
            if (samplers[index] == nullptr) continue;
            slot.prefilling = false;
        }
        if (drawn[index] == GPT_TOKEN_NONE)
            end(seq, "error", GPT_ERR_NON_FINITE, refused);
        else
            deliver(seq, drawn[index], nullptr);
    }
}

void Scheduler::decode() {
    std::vector<int> rows;
    for (size_t seq = 0; seq < slots_.size(); ++seq) {
        step_tokens_[seq] = slots_[seq].pending;
        if (slots_[seq].pending != GPT_TOKEN_NONE) rows.push_back(static_cast<int>(seq));
    }
    if (options_.metrics) options_.metrics->observe_batch_size(static_cast<double>(rows.size()));
    const bool logprobs = std::any_of(
        rows.begin(), rows.end(), [&](int seq) { return slots_[static_cast<size_t>(seq)].job->spec().logprobs >= 0; });
    if (!logprobs) return decode_and_sample(rows);
    const gpt_status s = gpt_session_decode_batch_v2(session_, step_tokens_.data(), logits_.data(), logits_.size());
    for (int seq : rows) slots_[static_cast<size_t>(seq)].pending = GPT_TOKEN_NONE;
    if (s != GPT_OK) return fail_all(rows, s);
    for (int seq : rows) slots_[static_cast<size_t>(seq)].cached.push_back(step_tokens_[static_cast<size_t>(seq)]);
    sample(rows);
}

// A step without log-probabilities samples where the logits are: on a GPU only the ids come back.
// A row whose logits cannot be sampled comes back GPT_TOKEN_NONE and ends only its own request.
void Scheduler::decode_and_sample(const std::vector<int> &rows) {
    std::vector<gpt_sampler *> samplers(slots_.size(), nullptr);
    for (int seq : rows) samplers[static_cast<size_t>(seq)] = slots_[static_cast<size_t>(seq)].sampler;
    std::vector<gpt_token> drawn(slots_.size(), GPT_TOKEN_NONE);
    const gpt_status s =
        gpt_session_decode_sample_batch_v2(session_, step_tokens_.data(), samplers.data(), drawn.data(), nullptr, 0);
    for (int seq : rows) slots_[static_cast<size_t>(seq)].pending = GPT_TOKEN_NONE;
    if (s != GPT_OK && s != GPT_ERR_NON_FINITE) return fail_all(rows, s);
    const std::string refused = s == GPT_OK ? std::string() : runtime_error_text(s);  // names the rows refused
    for (int seq : rows) {
        slots_[static_cast<size_t>(seq)].cached.push_back(step_tokens_[static_cast<size_t>(seq)]);
        const gpt_token token = drawn[static_cast<size_t>(seq)];
        if (token == GPT_TOKEN_NONE)
            end(seq, "error", GPT_ERR_NON_FINITE, refused);
        else
            deliver(seq, token, nullptr);
    }
}

// One call draws every row of the step. A row whose logits cannot be sampled comes back GPT_TOKEN_NONE and ends
// only its own request (gpt_sampler_sample_batch_v2's rule, as gpt_session_decode_sample_batch_v2's).
void Scheduler::sample(const std::vector<int> &rows) {
    std::vector<gpt_sampler *> samplers(slots_.size(), nullptr);
    int n_top = -1;
    for (int seq : rows) {
        samplers[static_cast<size_t>(seq)] = slots_[static_cast<size_t>(seq)].sampler;
        n_top = std::max(n_top, slots_[static_cast<size_t>(seq)].job->spec().logprobs);
    }
    const int32_t n_rows = *std::max_element(rows.begin(), rows.end()) + 1;  // rows need not be in order
    const size_t stride = 1 + static_cast<size_t>(std::max(n_top, 0));
    logprob_rows_.resize(static_cast<size_t>(n_rows) * stride);
    gpt_token_logprob *logprobs = n_top >= 0 ? logprob_rows_.data() : nullptr;
    const gpt_status s = gpt_sampler_sample_batch_v2(samplers.data(), n_rows, logits_.data(), info_.vocab_size,
                                                     step_tokens_.data(), std::max(n_top, 0), logprobs);
    if (s != GPT_OK && s != GPT_ERR_NON_FINITE) return fail_all(rows, s);
    const std::string refused = s == GPT_OK ? std::string() : runtime_error_text(s);  // names the rows refused
    for (int seq : rows) {
        const gpt_token token = step_tokens_[static_cast<size_t>(seq)];
        if (token == GPT_TOKEN_NONE)
            end(seq, "error", GPT_ERR_NON_FINITE, refused);
        else
            deliver(seq, token, logprobs ? logprobs + seq * stride : nullptr);
    }
}

// A sampled token: its text goes to the client, then the request either ends or feeds it to the next step.
void Scheduler::deliver(int seq, gpt_token token, const gpt_token_logprob *logprobs) {
    Slot &slot = slots_[static_cast<size_t>(seq)];
    const JobSpec &spec = slot.job->spec();
    if (spec.stop_at_eos && token == info_.eos_token) return end(seq, "stop");  // the end of the text, not a part

    const Clock::time_point now = Clock::now();
    TokenEvent event;
    event.token = token;
    event.latency = seconds_between(slot.last, now);
    slot.last = now;
    if (slot.detokenizer)
        event.text = text_of(
            [&](char *t, size_t c, size_t *n) { return gpt_detokenizer_push(slot.detokenizer, token, t, c, n); });
    if (logprobs) event.logprobs.assign(logprobs, logprobs + 1 + std::max(spec.logprobs, 0));
    // The first token's wait is the request's time to first token, which its handler measures from arrival.
    if (options_.metrics && slot.generated > 0) options_.metrics->observe_token_latency(event.latency);
    ++slot.generated;
    slot.history.push_back(token);
    slot.job->completion_tokens_ = slot.generated;
    slot.job->emit(std::move(event));

    int32_t stopped = -1;
    if (slot.detokenizer) gpt_detokenizer_stopped(slot.detokenizer, &stopped);
    if (stopped >= 0) return end(seq, "stop");
    if (slot.generated >= spec.max_tokens) return end(seq, "length");
    if (slot.cached.size() < static_cast<size_t>(info_.block_size)) {
        slot.pending = token;
    } else {
        slot.refill = true;  // the context is full: this token cannot be appended, a shorter window is prefilled
    }
}

}  // namespace server
