// scheduler.h — continuous batching: one thread owns a batched session of
// `parallel` slots and steps every running request together, so a decode step,
// which reads every weight once whatever the batch, serves all of them.
//
// Between two decode steps the scheduler takes waiting requests into free slots
// and prefills their prompts, interleaved with the running streams: at most
// `prefill_budget` prompt tokens between two decode steps. A longer prompt is
// prefilled in pieces, one a round (chunked prefill, gpt_session_extend_seq), so
// it delays the others' next token by one piece, not by its whole prefill; whole
// prompts that fit share one gpt_session_prefill_batch call.
// A slot keeps its sequence's cache after its request ends: a new prompt goes to
// the free slot holding the longest prefix of it, copied from another slot that
// holds more (prefix_cache.h), and only the rest is prefilled. Each slot keeps its
// own sampler (settings, seed, random stream), stop strings, detokenizer, deadline
// and cancellation; one gpt_sampler_sample_batch call draws every row of a step.
// A finished, cancelled or timed-out request frees its slot at once. When a
// sequence fills the context, its most recent half window is prefilled again and
// it goes on, as gpt_session_generate does.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "clock.h"
#include "gpt_runtime.h"

namespace server {

class Metrics;

// What a request asks of the scheduler.
struct JobSpec {
    std::vector<gpt_token> prompt;  // 1..block_size tokens, checked by the caller
    int max_tokens = 16;
    gpt_sampler_params sampling{};  // temperature, top_k, top_p, seed
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

// A request inside the scheduler: its spec, the events it produced, how it ended.
// The HTTP thread waits on it; the scheduler thread fills it.
class Job {
public:
    explicit Job(JobSpec spec) : spec_(std::move(spec)), submitted_(spec_.arrived) {}

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

struct SchedulerOptions {
    int parallel = 4;          // slots: sequences decoded together (<= the artifact's max_batch)
    int prefill_budget = 512;  // prompt tokens prefilled between two decode steps (> 0)
    Metrics *metrics = nullptr;
    const std::atomic<bool> *stop_all = nullptr;  // set when shutdown's grace period ends
    bool prefix_cache = true;                     // reuse the cache of a prompt's prefix that a slot holds
};

class Scheduler {
public:
    // Creates the batched session (GPT_ERR_* from the runtime is thrown as std::runtime_error).
    Scheduler(gpt_model *model, const gpt_model_info &info, SchedulerOptions options);
    // Ends every request still inside ("shutdown") and joins the thread.
    ~Scheduler();
    Scheduler(const Scheduler &) = delete;
    Scheduler &operator=(const Scheduler &) = delete;

    void submit(const std::shared_ptr<Job> &job);
    int slots_in_use() const { return in_use_; }
    int waiting() const;
    // The runtime reported a CUDA error: the device is not to be trusted any more.
    bool device_failed() const { return device_failed_; }

private:
    struct Slot;
    void run();
    void admit();
    void place(int seq, const std::vector<gpt_token> &prompt);
    void start_refill(int seq);
    void prefill();
    void sync_cached(int seq);
    static bool stop_extend(void *scheduler);
    void decode();
    void decode_and_sample(const std::vector<int> &rows);
    void sample(const std::vector<int> &rows);
    void deliver(int seq, gpt_token token, const gpt_token_logprob *logprobs);
    void end(int seq, const std::string &reason, gpt_status status = GPT_OK, const std::string &error = "");
    void fail_all(const std::vector<int> &seqs, gpt_status status);
    void retire_finished();

    gpt_model *const model_;
    const gpt_model_info info_;
    const SchedulerOptions options_;
    gpt_session *session_ = nullptr;
    std::vector<Slot> slots_;
    std::vector<float> logits_;  // parallel rows of vocab_size
    std::vector<gpt_token> step_tokens_;
    std::vector<gpt_token_logprob> logprob_rows_;
    Job *extending_ = nullptr;  // the request whose prompt gpt_session_extend_seq is prefilling

    mutable std::mutex mutex_;
    std::condition_variable work_;
    std::deque<std::shared_ptr<Job>> waiting_;
    bool stopping_ = false;
    std::atomic<int> in_use_{0};
    std::atomic<bool> device_failed_{false};
    std::thread thread_;
};

}  // namespace server
