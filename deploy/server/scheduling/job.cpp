// job.cpp — see job.h.
#include "scheduling/job.h"

namespace server {

// ---- JobSignal -------------------------------------------------------------------------------------------

void JobSignal::notify() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        ++count_;
    }
    changed_.notify_all();
}

uint64_t JobSignal::count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
}

void JobSignal::wait_past(uint64_t seen, Clock::time_point until) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_until(lock, until, [&] { return count_ != seen; });
}

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
    if (signal_) signal_->notify();
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
    if (signal_) signal_->notify();
}

}  // namespace server
