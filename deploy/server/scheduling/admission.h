// admission.h — how many generations the server takes at once (running in a slot or
// waiting in the scheduler's queue, the one queue there is), and the drain at
// shutdown. A request holds a Ticket from its admission to its reply's end.
#pragma once

#include <condition_variable>
#include <mutex>

#include "clock.h"

namespace server {

class Admission {
public:
    enum class Verdict { admitted, queue_full, draining };

    // At most `slots` generations running and `queue` more waiting for a slot.
    Admission(int slots, int queue);

    // Takes `places` (a request's completions, each in a slot or the queue) at once, or none and says why
    // not: it never waits (the scheduler's queue does).
    Verdict enter(int places = 1);
    void leave(int places = 1);
    int capacity() const { return capacity_; }

    // From now on enter() says `draining`.
    void drain();
    bool draining() const;
    // True once no request holds a place; false at `deadline`.
    bool wait_idle(Clock::time_point deadline);

    // Every place taken: enter() would say queue_full.
    bool full() const;
    int admitted() const;

private:
    const int capacity_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    int admitted_ = 0;
    bool draining_ = false;
};

// Holds admitted places until destruction.
class Ticket {
public:
    Ticket(Admission &admission, int places) : admission_(admission), places_(places) {}
    ~Ticket() { admission_.leave(places_); }
    Ticket(const Ticket &) = delete;
    Ticket &operator=(const Ticket &) = delete;

private:
    Admission &admission_;
    const int places_;
};

}  // namespace server
