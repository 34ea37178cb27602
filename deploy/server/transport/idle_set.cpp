// idle_set.cpp — see idle_set.h.
#include "idle_set.h"

#include <utility>

namespace server::http {

uint64_t IdleSet::add(std::function<void(uint64_t)> close) {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t ticket = next_ticket_++;
    waiting_.emplace(ticket, std::move(close));
    return ticket;
}

void IdleSet::remove(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting_.erase(ticket);
}

bool IdleSet::close_oldest() {
    std::function<void(uint64_t)> close;
    uint64_t ticket = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (waiting_.empty()) return false;
        ticket = waiting_.begin()->first;
        close = std::move(waiting_.begin()->second);
        waiting_.erase(waiting_.begin());
    }
    close(ticket);  // outside the lock: it posts to the connection's strand
    return true;
}

size_t IdleSet::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return waiting_.size();
}

}  // namespace server::http
