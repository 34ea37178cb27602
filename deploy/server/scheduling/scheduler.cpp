// scheduler.cpp — see scheduler.h.
#include "scheduling/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "metrics.h"
#include "scheduling/prefix_cache.h"
#include "scheduling/scheduler_slot.h"

namespace server {

// ---- Scheduler -------------------------------------------------------------------------------------------

int default_prefill_budget(const gpt_model_info &info) {
    if (std::string(info.device) == "cuda") return 512;
    return info.mixed_graph ? 8 : 16;
}

Scheduler::Scheduler(gpt_model *model, const gpt_model_info &info, SchedulerOptions options)
    : model_(model),
      info_(info),
      options_(options),
      prefill_budget_(
          static_cast<size_t>(options.prefill_budget > 0 ? options.prefill_budget : default_prefill_budget(info))),
      slots_(static_cast<size_t>(options.parallel)) {
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
    gpt_session_set_abort_callback(session_, stop_extend, this);
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
    while (true) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            work_.wait(lock, [this] { return stopping_ || !waiting_.empty() || in_use_ > 0; });
            if (stopping_) return;
            admit();
        }
        retire_finished();
        for (size_t seq = 0; seq < slots_.size(); ++seq)
            if (slots_[seq].refill) start_refill(static_cast<int>(seq));
        const bool prompts = std::any_of(slots_.begin(), slots_.end(), [](const Slot &s) { return s.prefilling; });
        const bool streams =
            std::any_of(slots_.begin(), slots_.end(), [](const Slot &s) { return s.pending != GPT_TOKEN_NONE; });
        if (prompts && streams && info_.mixed_graph && !logprobs_wanted()) {
            step_with_prompts();  // the prompts' pieces ride in the streams' decode step
            continue;
        }
        if (prompts) prefill();
        if (std::any_of(slots_.begin(), slots_.end(), [](const Slot &s) { return s.pending != GPT_TOKEN_NONE; }))
            decode();
    }
}

// Under mutex_: waiting requests into free slots while there are any (the prefill budget then paces their
// prompts), each where prefix_cache.h places it: with nothing cached, the lowest free slot, so a lone request
// runs as sequence 0, as a single-sequence session would.
void Scheduler::admit() {
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
    std::vector<const std::vector<gpt_token> *> cached;
    for (const Slot &slot : slots_) cached.push_back(&slot.cached);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
        // Another completion of a prompt still being prefilled waits for it, and then copies its cache.
        if (options_.prefix_cache && prompt_pending((*it)->spec().shares_prompt_with)) {
            ++it;
            continue;
        }
        std::vector<bool> free;
        for (const Slot &slot : slots_) free.push_back(!slot.job);
        std::shared_ptr<Job> job = *it;
        const PromptPlacement placement = place_prompt(cached, free, job->spec().prompt, options_.prefix_cache);
        if (placement.slot < 0) break;
        it = waiting_.erase(it);
        const auto seq = static_cast<size_t>(placement.slot);
        Slot &slot = slots_[seq];
        gpt_sampler_params sampling = job->spec().sampling;
        sampling.logit_bias = job->spec().logit_bias.data();
        sampling.n_logit_bias = static_cast<int32_t>(job->spec().logit_bias.size());
        if (gpt_status s = gpt_sampler_create(&sampling, &slot.sampler); s != GPT_OK) {
            job->finish("error", s, runtime_error_text(s));
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
        slot.generated = 0;
        slot.last = slot.job->submitted_;
        ++in_use_;
        // The reused prefix goes into the slot now, before a later newcomer is placed by what the slots hold.
        const gpt_status s =
            placement.source == placement.slot
                ? gpt_session_truncate_seq(session_, placement.slot, static_cast<int32_t>(placement.reused))
                : gpt_session_copy_seq(session_, placement.source, placement.slot,
                                       static_cast<int32_t>(placement.reused));
        if (s == GPT_OK) {
            if (placement.source != placement.slot) slot.cached = slots_[static_cast<size_t>(placement.source)].cached;
            slot.cached.resize(placement.reused);
        } else {  // nothing reused: the prompt is prefilled whole
            spdlog::warn("event=prefix_reuse_failed seq={} error=\"{}\"", placement.slot, runtime_error_text(s));
            slot.cached.clear();
            if (gpt_session_truncate_seq(session_, placement.slot, 0) != GPT_OK) {
                end(placement.slot, "error", s, runtime_error_text(s));
                continue;
            }
        }
        slot.job->cached_tokens_ = static_cast<int>(slot.cached.size());
        if (options_.metrics) options_.metrics->count_prompt_tokens("cached", slot.cached.size());
        if (!slot.cached.empty())
            spdlog::info("event=prefix_reused seq={} source={} reused={} prompt={}", placement.slot, placement.source,
                         slot.cached.size(), slot.history.size());
        slot.feed = slot.history;
        slot.prefilling = true;
    }
}

// Under mutex_: whether `job` still waits for a slot or is prefilling its prompt (false once it is gone).
bool Scheduler::prompt_pending(const std::weak_ptr<Job> &job) const {
    const std::shared_ptr<Job> other = job.lock();
    if (!other) return false;
    if (std::find(waiting_.begin(), waiting_.end(), other) != waiting_.end()) return true;
    // Its prompt, not a context refill later on (after which the slot no longer holds the prompt).
    return std::any_of(slots_.begin(), slots_.end(),
                       [&](const Slot &s) { return s.job == other && s.prefilling && s.generated == 0; });
}

// The context is full: the most recent half window is prefilled again, as gpt_session_generate does.
void Scheduler::start_refill(int seq) {
    Slot &slot = slots_[static_cast<size_t>(seq)];
    const size_t keep = static_cast<size_t>(std::max(1, info_.block_size / 2));
    slot.refill = false;
    slot.feed.assign(slot.history.end() - static_cast<std::ptrdiff_t>(keep), slot.history.end());
    slot.cached.clear();
    if (const gpt_status s = gpt_session_truncate_seq(session_, seq, 0); s != GPT_OK)
        return end(seq, "error", s, runtime_error_text(s));
    slot.prefilling = true;
}

// After a failed call: the sequence holds no more than the session says (a failed prefill leaves it empty).
void Scheduler::sync_cached(int seq) {
    Slot &slot = slots_[static_cast<size_t>(seq)];
    int32_t position = 0;
    if (gpt_session_get_position_seq(session_, seq, &position) != GPT_OK) position = 0;
    if (static_cast<size_t>(position) < slot.cached.size()) slot.cached.resize(static_cast<size_t>(position));
}

// The abort callback of the session's extend calls: the request whose prompt is being prefilled was cancelled,
// or shutdown's grace period ended. The sequence keeps the pieces that ran.
bool Scheduler::stop_extend(void *scheduler) {
    const auto *self = static_cast<const Scheduler *>(scheduler);
    return (self->options_.stop_all && self->options_.stop_all->load()) ||
           (self->extending_ != nullptr && self->extending_->cancelled());
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

// The slots whose prompt (or refill window) is still going into the cache, the longest waiting first: the order in
// which a round's prefill budget serves them, so that a newcomer's wait is bounded by those ahead of it, not by
// the slots numbered below it (at 16 clients, two interleaved rounds: tokens/s +3–6 %, first-token p50 −6 %
// against slot order; bench/results/cpu-2026-11-28-prefill-fifo/).
std::vector<size_t> Scheduler::prefill_order() const {
    std::vector<size_t> order;
    for (size_t seq = 0; seq < slots_.size(); ++seq)
        if (slots_[seq].job && slots_[seq].prefilling) order.push_back(seq);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return slots_[a].last < slots_[b].last; });
    return order;
}

// One round of prompts, within the prefill budget, the longest waiting first: a prompt that starts empty and fits whole
// joins one gpt_session_prefill_batch_v2 call with the others that do, and its rows draw their first token now. Any
// other (the rest of a prompt after a reused prefix, a piece of one longer than what is left of the budget) is appended
// with gpt_session_extend_seq_v2 up to its last token, and that token goes in as a row of the next decode step:
// the running sequences then wait for no call of its own, however many prompts end in the round (the same prompt
// sent again reuses all of it but that token, so it costs no call at all).
void Scheduler::prefill() {
    std::vector<const gpt_token *> prompts(slots_.size(), nullptr);
    std::vector<int32_t> n_tokens(slots_.size(), 0);
    std::vector<int> whole;
    // Running streams wait for this round's prompts: while one does, the round takes at most the budget. With none
    // waiting, nobody is delayed and the round takes a context's worth (a lone request's prompt in one call).
    const bool streams_wait =
        std::any_of(slots_.begin(), slots_.end(), [](const Slot &s) { return s.pending != GPT_TOKEN_NONE; });
    size_t budget = streams_wait ? prefill_budget_ : std::max(prefill_budget_, static_cast<size_t>(info_.block_size));
    for (const size_t seq : prefill_order()) {
        Slot &slot = slots_[seq];
        if (!slot.job || !slot.prefilling) continue;  // ended by an earlier slot's failure this round
        const bool prompt = slot.generated == 0;      // not a refill's window
        const size_t done = slot.cached.size();
        if (done == 0 && slot.feed.size() <= budget) {
            budget -= slot.feed.size();
            prompts[seq] = slot.feed.data();
            n_tokens[seq] = static_cast<int32_t>(slot.feed.size());
            whole.push_back(static_cast<int>(seq));
            continue;
        }
        const size_t piece = std::min(slot.feed.size() - 1 - done, budget);
        if (piece > 0) {
            budget -= piece;
            extending_ = slot.job.get();
            const gpt_status s = gpt_session_extend_seq_v2(session_, static_cast<int32_t>(seq), slot.feed.data() + done,
                                                           static_cast<int32_t>(piece), nullptr, 0);
            extending_ = nullptr;
            int32_t position = 0;  // the pieces that ran stay, also when the call stopped or failed
            gpt_session_get_position_seq(session_, static_cast<int32_t>(seq), &position);
            const size_t held = std::min(static_cast<size_t>(std::max(position, 0)), slot.feed.size());
            slot.cached.assign(slot.feed.begin(), slot.feed.begin() + static_cast<std::ptrdiff_t>(held));
            if (options_.metrics && prompt && held > done) options_.metrics->count_prompt_tokens("extend", held - done);
            if (s == GPT_ERR_ABORTED) {
                end(static_cast<int>(seq), slot.job->cancelled() ? "cancelled" : "shutdown");
                continue;
            }
            if (s != GPT_OK) {
                fail_all({static_cast<int>(seq)}, s);
                continue;
            }
        }
        if (!slot.cached.empty() && slot.cached.size() + 1 == slot.feed.size()) {  // a step needs a filled cache
            slot.prefilling = false;
            slot.pending = slot.feed.back();
            if (options_.metrics && prompt) options_.metrics->count_prompt_tokens("step", 1);
        }
    }
    if (whole.empty()) return;
    const gpt_status s =
        gpt_session_prefill_batch_v2(session_, prompts.data(), n_tokens.data(), logits_.data(), logits_.size());
    if (s != GPT_OK) {
        for (int seq : whole) slots_[static_cast<size_t>(seq)].cached.clear();  // a failed prefill leaves them empty
        return fail_all(whole, s);
    }
    for (int seq : whole) {
        Slot &slot = slots_[static_cast<size_t>(seq)];
        slot.cached = slot.feed;
        slot.prefilling = false;
        if (options_.metrics && slot.generated == 0) options_.metrics->count_prompt_tokens("prefill", slot.feed.size());
    }
    sample(whole);  // in order: the slots were visited in order
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
    slot.prefilling = false;
    slot.history.clear();
    slot.feed.clear();  // `cached` stays: the next prompt that starts with it reuses it
}

// A failed prefill or step ends the requests it was for. CUDA errors leave the device unusable.
void Scheduler::fail_all(const std::vector<int> &seqs, gpt_status status) {
    const std::string error = runtime_error_text(status);
    if (status == GPT_ERR_CUDA) {
        device_failed_ = true;
        spdlog::critical("event=device_failed error=\"{}\"", error);
    }
    for (int seq : seqs) {
        sync_cached(seq);
        if (slots_[static_cast<size_t>(seq)].job) end(seq, "error", status, error);
    }
}

}  // namespace server
