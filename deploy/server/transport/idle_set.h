// idle_set.h — the connections of a listener that wait for their next request, oldest
// first. At the connection cap the oldest of them is closed to let a new client in,
// so a flood of idle connections cannot keep clients out; connections in the middle
// of a request are never taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace server::http {

class IdleSet {
public:
    // `close(ticket)` ends the connection (from any thread) if it still waits under that ticket; returns the
    // ticket, which remove() takes.
    uint64_t add(std::function<void(uint64_t ticket)> close);
    // The connection began a request, or ended: it is no longer one to close.
    void remove(uint64_t ticket);
    // Closes the connection idle the longest; false when none is idle.
    bool close_oldest();
    size_t size() const;

private:
    mutable std::mutex mutex_;
    std::map<uint64_t, std::function<void(uint64_t)>> waiting_;  // by ticket: the order they began waiting
    uint64_t next_ticket_ = 1;
};

}  // namespace server::http
