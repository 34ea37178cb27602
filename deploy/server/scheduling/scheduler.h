// scheduler.h — continuous batching: one thread owns a batched session of
// `parallel` slots and steps every running request together, so a decode step,
// which reads every weight once whatever the batch, serves all of them.
//
// Between two decode steps the scheduler takes waiting requests into free slots
// and prefills their prompts, interleaved with the running streams: at most
// `prefill_budget` prompt tokens between two decode steps while any stream waits
// for its next token (with none, a context's worth a round). A longer prompt is
// prefilled in pieces, one a round (chunked prefill), so it delays the others' next
// token by one piece, not by its whole prefill. With the artifact's mixed graph the
// round's prompt tokens go into the streams' decode step itself (one
// gpt_session_append_sample_batch, scheduler_step.cpp): a piece then costs its
// tokens' compute, not another read of every weight. Without it, each piece is a
// gpt_session_extend_seq call, and whole prompts that fit share one
// gpt_session_prefill_batch call. A prompt extended
// after a cached prefix or in pieces has its last token stepped as a row of the
// next decode step, beside the running sequences, which draws its first token.
// A slot keeps its sequence's cache after its request ends: a new prompt goes to
// the free slot holding the longest prefix of it, copied from another slot that
// holds more (prefix_cache.h), and only the rest is prefilled. Each slot keeps its
// own sampler (settings, seed, random stream), stop strings, detokenizer, deadline
// and cancellation; one gpt_sampler_sample_batch_v2 call draws every row of a step.
// A finished, cancelled or timed-out request frees its slot at once. When a
// sequence fills the context, its most recent half window is prefilled again and
// it goes on, as gpt_session_generate does.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "clock.h"
#include "gpt_runtime.h"
#include "scheduling/job.h"

namespace server {

class Metrics;
struct SchedulerOptions {
    int parallel = 4;  // slots: sequences decoded together (<= the artifact's max_batch)
    // Prompt tokens prefilled between two decode steps while a stream waits; 0: the device's default
    // (default_prefill_budget).
    int prefill_budget = 0;
    Metrics *metrics = nullptr;
    const std::atomic<bool> *stop_all = nullptr;  // set when shutdown's grace period ends
    bool prefix_cache = true;                     // reuse the cache of a prompt's prefix that a slot holds
};

// The prefill budget a device gets by default. On a CPU a prompt's prefill costs about its tokens' share of the
// compute (2 ms a token for GPT-2 124M on two cores), so the running streams' next token waits for every token of
// the round. With the mixed graph a piece rides in the decode step and costs only that: 8 keep the step within
// ~1.4x its time at 16 streams. Without it each piece is a call of its own that reads every weight again, and
// smaller pieces cost throughput: 16. On a GPU a prefill of hundreds of tokens costs about what one of 16 does
// (the step is launch- and weight-bound), so pieces can be large.
int default_prefill_budget(const gpt_model_info &info);

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
    bool prompt_pending(const std::weak_ptr<Job> &job) const;
    void place(int seq, const std::vector<gpt_token> &prompt);
    void start_refill(int seq);
    void prefill();
    std::vector<size_t> prefill_order() const;
    void sync_cached(int seq);
    static bool stop_extend(void *scheduler);
    bool logprobs_wanted() const;
    void step_with_prompts();
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
    const size_t prefill_budget_;  // options_.prefill_budget, or the device's default
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
