// admission.cpp — see admission.h.
#include "scheduling/admission.h"

namespace server {

Admission::Admission(int slots, int queue) : capacity_(slots + queue) {}

Admission::Verdict Admission::enter(int places) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (draining_) return Verdict::draining;
    if (admitted_ + places > capacity_) return Verdict::queue_full;
    admitted_ += places;
    return Verdict::admitted;
}

void Admission::leave(int places) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        admitted_ -= places;
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
    return changed_.wait_until(lock, deadline, [this] { return admitted_ == 0; });
}

bool Admission::full() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return admitted_ >= capacity_;
}

int Admission::admitted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return admitted_;
}

}  // namespace server
