// job.h — a request inside the scheduler: what it asks (JobSpec), what it produced (TokenEvent),
// how it ended. The request's HTTP thread waits on its jobs; the scheduler's thread fills them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "clock.h"
#include "gpt_runtime.h"

namespace server {

class Job;

// What a request asks of the scheduler.
struct JobSpec {
    std::vector<gpt_token> prompt;  // 1..block_size tokens, checked by the caller
    int max_tokens = 16;
    gpt_sampler_params sampling{};  // temperature, top_k, top_p, seed, penalties (its logit_bias is not read) ...
    std::vector<gpt_logit_bias> logit_bias;  // ... and the logit bias, which the sampler copies when it is made
    // Another completion of the same prompt (a request's `n`): with the prefix cache on, this job waits in the
    // queue until that one's prompt is in a slot's cache, and then copies it instead of computing it again.
    std::weak_ptr<Job> shares_prompt_with;
    std::vector<std::string> stop;  // the text ends before the first of them
    bool stop_at_eos = true;        // EOS ends the text (and is not part of it)
    int logprobs = -1;              // -1: none; n >= 0: the chosen token's and the n most likely
    Clock::time_point arrived;      // the request's arrival: queue wait and time to first token count from it
    Clock::time_point deadline;
};

// One generated token as the client sees it.
struct TokenEvent {
    gpt_token token = 0;
    std::string text;                         // the text it completes (stop strings and split characters held)
    std::vector<gpt_token_logprob> logprobs;  // [chosen, top...] when JobSpec::logprobs >= 0
    double latency = 0;                       // seconds since the previous token, or since submission
};

// Wakes a thread that waits on several jobs at once (run_jobs in generate.h): the jobs of a request share one.
class JobSignal {
public:
    void notify();
    uint64_t count() const;  // notifications so far
    // Returns once count() is past `seen`, or at `until`.
    void wait_past(uint64_t seen, Clock::time_point until);

private:
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    uint64_t count_ = 0;
};

// A request inside the scheduler: its spec, the events it produced, how it ended.
// The HTTP thread waits on it; the scheduler thread fills it, and notifies `signal` (when given) too.
class Job {
public:
    explicit Job(JobSpec spec, std::shared_ptr<JobSignal> signal = nullptr)
        : spec_(std::move(spec)), submitted_(spec_.arrived), signal_(std::move(signal)) {}

    const JobSpec &spec() const { return spec_; }
    // Moves the new events to `out`; waits until there is one or the job ended (or `until`).
    // Returns true once the job has ended and every event was taken.
    bool take(std::vector<TokenEvent> *out, Clock::time_point until);
    // The client is gone: the slot is freed at the next step.
    void cancel() { cancelled_ = true; }
    bool cancelled() const { return cancelled_; }

    // Valid once take() returned true.
    const std::string &finish_reason() const { return finish_reason_; }  // stop, length, cancelled, timeout, shutdown
    gpt_status status() const { return status_; }                        // GPT_OK unless the runtime failed
    const std::string &error() const { return error_; }
    int completion_tokens() const { return completion_tokens_; }
    int cached_tokens() const { return cached_tokens_; }  // prompt tokens whose cache was reused, not computed
    double queue_wait() const { return queue_wait_; }     // seconds from arrival to its prefill
    bool got_slot() const { return got_slot_; }           // false: it ended while waiting in the queue

private:
    friend class Scheduler;
    void emit(TokenEvent event);
    void finish(const std::string &reason, gpt_status status = GPT_OK, const std::string &error = "");

    const JobSpec spec_;
    const Clock::time_point submitted_;
    const std::shared_ptr<JobSignal> signal_;
    std::atomic<bool> cancelled_{false};
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<TokenEvent> events_;
    bool ended_ = false;
    std::string finish_reason_;
    gpt_status status_ = GPT_OK;
    std::string error_;
    int completion_tokens_ = 0;
    int cached_tokens_ = 0;
    double queue_wait_ = 0;
    bool got_slot_ = false;
};

}  // namespace server
