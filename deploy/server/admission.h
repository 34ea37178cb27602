// admission.h — how many generations run at once, how many may wait, and the
// drain at shutdown. A request holds a Ticket while it generates.
#pragma once

#include <condition_variable>
#include <mutex>

#include "clock.h"

namespace server {

class Admission {
public:
    enum class Verdict { admitted, queue_full, draining, timed_out };

    Admission(int max_active, int max_queued);

    // Takes a slot, waiting in the queue until `deadline` when all are busy.
    Verdict enter(Clock::time_point deadline);
    void leave();

    // From now on enter() says `draining`; queued requests are woken and refused.
    void drain();
    bool draining() const;
    // True once no request holds a slot; false at `deadline`.
    bool wait_idle(Clock::time_point deadline);

    // Every slot and queue place taken: enter() would say queue_full.
    bool full() const;
    int active() const;
    int queued() const;

private:
    const int max_active_;
    const int max_queued_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    int active_ = 0;
    int queued_ = 0;
    bool draining_ = false;
};

// Holds an admitted slot until destruction.
class Ticket {
public:
    explicit Ticket(Admission &admission) : admission_(admission) {}
    ~Ticket() { admission_.leave(); }
    Ticket(const Ticket &) = delete;
    Ticket &operator=(const Ticket &) = delete;

private:
    Admission &admission_;
};

}  // namespace server
