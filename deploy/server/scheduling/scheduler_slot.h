// scheduler_slot.h — what scheduler.cpp (admission, prompts) and scheduler_step.cpp (decode steps, delivery)
// share inside the scheduler: a slot's state and the helpers both use. Not for other files.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "clock.h"
#include "gpt_runtime.h"
#include "scheduling/job.h"
#include "scheduling/scheduler.h"

namespace server {

struct Scheduler::Slot {
    std::shared_ptr<Job> job;  // null: free
    gpt_sampler *sampler = nullptr;
    gpt_detokenizer *detokenizer = nullptr;  // null for an artifact without a text tokenizer
    gpt_token pending = GPT_TOKEN_NONE;      // emitted, to be appended at the next decode step
    bool refill = false;                     // the context is full: prefill the recent half window again
    bool prefilling = false;                 // `feed` is going into the cache, a piece a round
    std::vector<gpt_token> history;          // prompt and generated tokens, for refills
    std::vector<gpt_token> feed;             // what the cache holds once prefilled: the prompt, or a refill's window
    // The tokens this sequence's cache holds, in order (its position is their count). Kept after the request
    // ends: the next prompt that starts with them reuses their cache.
    std::vector<gpt_token> cached;
    int generated = 0;
    Clock::time_point last;  // when the last token (or the submission) was
};

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

inline std::string runtime_error_text(gpt_status status) {
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

}  // namespace server
