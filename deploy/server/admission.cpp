// admission.cpp — see admission.h.
#include "admission.h"

namespace server {

Admission::Admission(int max_active, int max_queued) : max_active_(max_active), max_queued_(max_queued) {}

Admission::Verdict Admission::enter(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (draining_) return Verdict::draining;
    if (active_ < max_active_) {
        ++active_;
        return Verdict::admitted;
    }
    if (queued_ >= max_queued_) return Verdict::queue_full;
    ++queued_;
    const bool got_slot = changed_.wait_until(lock, deadline, [this] { return draining_ || active_ < max_active_; });
    --queued_;
    if (draining_) return Verdict::draining;
    if (!got_slot) return Verdict::timed_out;
    ++active_;
    return Verdict::admitted;
}

void Admission::leave() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        --active_;
    }
    changed_.notify_all();
}

void Admission::drain() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        draining_ = true;
    }
    changed_.notify_all();
}

bool Admission::draining() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return draining_;
}

bool Admission::wait_idle(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_until(lock, deadline, [this] { return active_ == 0; });
}

bool Admission::full() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return active_ >= max_active_ && queued_ >= max_queued_;
}

int Admission::active() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return active_;
}

int Admission::queued() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return queued_;
}

}  // namespace server
