// scheduler.cpp — see scheduler.h.
#include "scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "metrics.h"

namespace server {

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

std::string runtime_error_text(gpt_status status) {
    return std::string(gpt_status_to_string(status)) + ": " + gpt_runtime_last_error();
}

// The text a detokenizer call gives out; "" when it gives none (it fails only on a bad token id).
template <typename Call>
std::string text_of(Call call) {
    char buffer[256];
    size_t size = 0;
    gpt_status s = call(buffer, sizeof buffer, &size);
    if (s == GPT_OK) return std::string(buffer, size - 1);
    if (s != GPT_ERR_BUFFER_TOO_SMALL) return "";
    std::string big(size, '\0');
    if (call(big.data(), big.size(), &size) != GPT_OK) return "";
    big.resize(size - 1);
    return big;
}

}  // namespace

// ---- Job -------------------------------------------------------------------------------------------------

bool Job::take(std::vector<TokenEvent> *out, Clock::time_point until) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_until(lock, until, [this] { return ended_ || !events_.empty(); });
    for (TokenEvent &e : events_) out->push_back(std::move(e));
    events_.clear();
    return ended_;
}

void Job::emit(TokenEvent event) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        events_.push_back(std::move(event));
    }
    changed_.notify_all();
}

void Job::finish(const std::string &reason, gpt_status status, const std::string &error) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (ended_) return;
        ended_ = true;
        finish_reason_ = reason;
        status_ = status;
        error_ = error;
    }
    changed_.notify_all();
}

// ---- Scheduler -------------------------------------------------------------------------------------------

struct Scheduler::Slot {
    std::shared_ptr<Job> job;  // null: free
    gpt_sampler *sampler = nullptr;
    gpt_detokenizer *detokenizer = nullptr;  // null for an artifact without a text tokenizer
    gpt_token pending = GPT_TOKEN_NONE;      // emitted, to be appended at the next decode step
    bool refill = false;                     // the context is full: prefill the recent half window again
    std::vector<gpt_token> history;          // prompt and generated tokens, for refills
    int position = 0;                        // tokens in this sequence's cache
    int generated = 0;
    Clock::time_point last;  // when the last token (or the submission) was
};

Scheduler::Scheduler(gpt_model *model, const gpt_model_info &info, SchedulerOptions options)
    : model_(model), info_(info), options_(options), slots_(static_cast<size_t>(options.parallel)) {
    if (options_.parallel < 1 || options_.parallel > info_.max_batch)
        throw std::runtime_error("--parallel " + std::to_string(options_.parallel) +
                                 " does not fit this artifact: it " + "decodes 1 to " +
                                 std::to_string(info_.max_batch) + " sequences at once (its max_batch)");
    if (gpt_status s = gpt_session_create_batch(model_, options_.parallel, &session_); s != GPT_OK)
        throw std::runtime_error("cannot create a session of " + std::to_string(options_.parallel) +
                                 " sequences: " + runtime_error_text(s));
    const auto rows = static_cast<size_t>(options_.parallel);
    logits_.resize(rows * static_cast<size_t>(info_.vocab_size));
    step_tokens_.resize(rows);
    thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    work_.notify_all();
    thread_.join();
    for (size_t seq = 0; seq < slots_.size(); ++seq)
        if (slots_[seq].job) end(static_cast<int>(seq), "shutdown");
    for (const auto &job : waiting_) job->finish("shutdown");
    gpt_session_free(session_);
}

void Scheduler::submit(const std::shared_ptr<Job> &job) {
    bool taken = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!stopping_) {
            waiting_.push_back(job);
            taken = true;
        }
    }
    if (!taken) return job->finish("shutdown");
    work_.notify_all();
}

int Scheduler::waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(waiting_.size());
}

void Scheduler::run() {
    std::vector<int> newcomers;
    while (true) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            work_.wait(lock, [this] { return stopping_ || !waiting_.empty() || in_use_ > 0; });
            if (stopping_) return;
            newcomers.clear();
            admit(&newcomers);
        }
        retire_finished();
        for (size_t seq = 0; seq < slots_.size(); ++seq)
            if (slots_[seq].refill) newcomers.push_back(static_cast<int>(seq));
        if (!newcomers.empty()) prefill(newcomers);
        if (std::any_of(slots_.begin(), slots_.end(), [](const Slot &s) { return s.pending != GPT_TOKEN_NONE; }))
            decode();
    }
}

// Under mutex_: waiting requests into the lowest free slots (a lone request runs as sequence 0, as a
// single-sequence session would), up to the prefill budget but always at least one.
void Scheduler::admit(std::vector<int> *newcomers) {
    const Clock::time_point now = Clock::now();
    // The queue is the server's only one (admission.h bounds it): a request that ends while it waits (its
    // client gone, its deadline passed, shutdown) leaves it now, not when a slot frees.
    const bool stop_all = options_.stop_all && options_.stop_all->load();
    for (auto it = waiting_.begin(); it != waiting_.end();) {
        const std::shared_ptr<Job> &job = *it;
        if (!job->cancelled() && now < job->spec().deadline && !stop_all) {
            ++it;
            continue;
        }
        job->finish(job->cancelled() ? "cancelled" : now >= job->spec().deadline ? "timeout" : "shutdown");
        it = waiting_.erase(it);
    }
    int budget = options_.prefill_budget;
    for (size_t seq = 0; seq < slots_.size() && !waiting_.empty(); ++seq) {
        Slot &slot = slots_[seq];
        if (slot.job) continue;
        std::shared_ptr<Job> job = waiting_.front();
        const auto prompt_tokens = static_cast<int>(job->spec().prompt.size());
        if (!newcomers->empty() && prompt_tokens > budget) break;  // the next round takes it
        waiting_.pop_front();
        budget -= prompt_tokens;
        if (gpt_status s = gpt_sampler_create(&job->spec().sampling, &slot.sampler); s != GPT_OK) {
            job->finish("error", s, runtime_error_text(s));
            --seq;
            continue;
        }
        if (std::string(info_.tokenizer) != "none") {
            std::vector<const char *> stop;
            for (const std::string &s : job->spec().stop) stop.push_back(s.c_str());
            gpt_status s = gpt_detokenizer_create(model_, &slot.detokenizer);
            if (s == GPT_OK)
                s = gpt_detokenizer_set_stop_strings(slot.detokenizer, stop.data(), static_cast<int32_t>(stop.size()));
            if (s != GPT_OK) {
                job->finish("error", s, runtime_error_text(s));
                gpt_sampler_free(std::exchange(slot.sampler, nullptr));
                gpt_detokenizer_free(std::exchange(slot.detokenizer, nullptr));
                --seq;
                continue;
            }
        }
        job->queue_wait_ = seconds_between(job->submitted_, now);
        job->got_slot_ = true;
        if (options_.metrics) options_.metrics->observe_queue_wait(job->queue_wait_);
        slot.job = std::move(job);
        slot.pending = GPT_TOKEN_NONE;
        slot.refill = false;
        slot.history = slot.job->spec().prompt;
        slot.position = 0;
        slot.generated = 0;
        slot.last = slot.job->submitted_;
        ++in_use_;
        newcomers->push_back(static_cast<int>(seq));
    }
}

// Running requests whose client left, whose deadline passed, or that shutdown ends: their slots free up now.
void Scheduler::retire_finished() {
    const Clock::time_point now = Clock::now();
    const bool shutting_down = options_.stop_all && options_.stop_all->load();
    for (size_t seq = 0; seq < slots_.size(); ++seq) {
        const Slot &slot = slots_[seq];
        if (!slot.job) continue;
        if (slot.job->cancelled()) {
            end(static_cast<int>(seq), "cancelled");
        } else if (now >= slot.job->spec().deadline) {
            end(static_cast<int>(seq), "timeout");
        } else if (shutting_down) {
            end(static_cast<int>(seq), "shutdown");
        }
    }
}

void Scheduler::prefill(const std::vector<int> &newcomers) {
    std::vector<const gpt_token *> prompts(slots_.size(), nullptr);
    std::vector<int32_t> n_tokens(slots_.size(), 0);
    std::vector<int> rows;
    // A refill, as gpt_session_generate does when the context fills: the most recent half window.
    const size_t keep = static_cast<size_t>(std::max(1, info_.block_size / 2));
    for (int seq : newcomers) {
        Slot &slot = slots_[static_cast<size_t>(seq)];
        if (!slot.job) continue;  // retired before its prefill
        const size_t start = slot.refill ? slot.history.size() - keep : 0;
        prompts[static_cast<size_t>(seq)] = slot.history.data() + start;
        n_tokens[static_cast<size_t>(seq)] = static_cast<int32_t>(slot.history.size() - start);
        slot.refill = false;
        rows.push_back(seq);
    }
    if (rows.empty()) return;
    const gpt_status s = gpt_session_prefill_batch(session_, prompts.data(), n_tokens.data(), logits_.data());
    if (s != GPT_OK) return fail_all(rows, s);
    for (int seq : rows) slots_[static_cast<size_t>(seq)].position = n_tokens[static_cast<size_t>(seq)];
    sample(rows);
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
    const gpt_status s = gpt_session_decode_batch(session_, step_tokens_.data(), logits_.data());
    for (int seq : rows) slots_[static_cast<size_t>(seq)].pending = GPT_TOKEN_NONE;
    if (s != GPT_OK) return fail_all(rows, s);
    for (int seq : rows) ++slots_[static_cast<size_t>(seq)].position;
    sample(rows);
}

// A step without log-probabilities samples where the logits are: on a GPU only the ids come back.
// A row whose logits cannot be sampled comes back GPT_TOKEN_NONE and ends only its own request.
void Scheduler::decode_and_sample(const std::vector<int> &rows) {
    std::vector<gpt_sampler *> samplers(slots_.size(), nullptr);
    for (int seq : rows) samplers[static_cast<size_t>(seq)] = slots_[static_cast<size_t>(seq)].sampler;
    std::vector<gpt_token> drawn(slots_.size(), GPT_TOKEN_NONE);
    const gpt_status s =
        gpt_session_decode_sample_batch(session_, step_tokens_.data(), samplers.data(), drawn.data(), nullptr);
    for (int seq : rows) slots_[static_cast<size_t>(seq)].pending = GPT_TOKEN_NONE;
    if (s != GPT_OK && s != GPT_ERR_NON_FINITE) return fail_all(rows, s);
    const std::string refused = s == GPT_OK ? std::string() : runtime_error_text(s);  // names the rows refused
    for (int seq : rows) {
        ++slots_[static_cast<size_t>(seq)].position;
        const gpt_token token = drawn[static_cast<size_t>(seq)];
        if (token == GPT_TOKEN_NONE)
            end(seq, "error", GPT_ERR_NON_FINITE, refused);
        else
            deliver(seq, token, nullptr);
    }
}

// One call draws every row of the step. A row whose logits cannot be sampled (NaN) fails the whole call without
// drawing anything, so the rows are then drawn one by one to end only the request it belongs to.
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
    gpt_status s = gpt_sampler_sample_batch(samplers.data(), n_rows, logits_.data(), info_.vocab_size,
                                            step_tokens_.data(), std::max(n_top, 0), logprobs);
    if (s == GPT_ERR_NON_FINITE) {
        for (int seq : rows) {
            const auto row = static_cast<size_t>(seq);
            s = gpt_sampler_sample_batch(
                &samplers[row], 1, logits_.data() + row * static_cast<size_t>(info_.vocab_size), info_.vocab_size,
                &step_tokens_[row], std::max(n_top, 0), logprobs ? logprobs + row * stride : nullptr);
            if (s != GPT_OK) {
                end(seq, "error", s, runtime_error_text(s));
                samplers[row] = nullptr;
            }
        }
    } else if (s != GPT_OK) {
        return fail_all(rows, s);
    }
    for (int seq : rows)
        if (samplers[static_cast<size_t>(seq)] != nullptr)
            deliver(seq, step_tokens_[static_cast<size_t>(seq)], logprobs ? logprobs + seq * stride : nullptr);
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
    if (slot.position < info_.block_size) {
        slot.pending = token;
    } else {
        slot.refill = true;  // the context is full: this token cannot be appended, a shorter window is prefilled
    }
}

// Frees the slot: what the detokenizer still holds goes out as a last piece of text.
void Scheduler::end(int seq, const std::string &reason, gpt_status status, const std::string &error) {
    Slot &slot = slots_[static_cast<size_t>(seq)];
    if (slot.detokenizer) {
        TokenEvent tail;
        tail.token = GPT_TOKEN_NONE;
        tail.text =
            text_of([&](char *t, size_t c, size_t *n) { return gpt_detokenizer_flush(slot.detokenizer, t, c, n); });
        if (!tail.text.empty() && status == GPT_OK) slot.job->emit(std::move(tail));
    }
    if (options_.metrics) options_.metrics->count_tokens(static_cast<uint64_t>(slot.generated));
    // Counted free before the client hears of the end: a reply read right after it sees the slot free.
    --in_use_;
    slot.job->finish(reason, status, error);
    gpt_sampler_free(std::exchange(slot.sampler, nullptr));
    gpt_detokenizer_free(std::exchange(slot.detokenizer, nullptr));
    slot.job.reset();
    slot.pending = GPT_TOKEN_NONE;
    slot.refill = false;
    slot.history.clear();
}

// A failed prefill or step ends the requests it was for. CUDA errors leave the device unusable.
void Scheduler::fail_all(const std::vector<int> &seqs, gpt_status status) {
    const std::string error = runtime_error_text(status);
    if (status == GPT_ERR_CUDA) {
        device_failed_ = true;
        spdlog::critical("event=device_failed error=\"{}\"", error);
    }
    for (int seq : seqs)
        if (slots_[static_cast<size_t>(seq)].job) end(seq, "error", status, error);
}

}  // namespace server
