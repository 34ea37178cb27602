// idle_connections.h — connections between requests, watched by one epoll thread
// instead of each holding a worker. httplib 0.11.4 keeps a worker on every
// keep-alive connection until its next request or the keep-alive timeout, so a few
// dozen idle clients used to take every worker and starve /healthz. Here a worker
// hands its connection over once no request is waiting and takes the next one; the
// connection comes back to a worker (`resume`) when bytes arrive, or is closed at
// its deadline. The same thread finishes connections that were refused mid-request
// (linger): their reply is out, the write side is shut, and what the client still
// sends is read and dropped until it stops or the deadline passes, so that the
// client reads the reply instead of a reset.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "guarded_connection.h"

namespace server {

class IdleConnections {
public:
    using Connection = std::shared_ptr<GuardedConnection>;
    using Clock = std::chrono::steady_clock;

    // `resume` runs on this class's thread and must only queue the connection for a worker.
    // Beyond `max_idle` connections the one closest to its deadline is closed.
    IdleConnections(size_t max_idle, std::function<void(Connection)> resume);
    ~IdleConnections();  // stop()
    IdleConnections(const IdleConnections &) = delete;
    IdleConnections &operator=(const IdleConnections &) = delete;

    // Resumes `connection` when the client sends its next request; closes it at `deadline`.
    void wait_for_request(Connection connection, Clock::time_point deadline);
    // Shuts the write side, drops the client's input until it stops, closes at `deadline`.
    void linger(Connection connection, Clock::time_point deadline);
    // Closes every connection held and stops the thread; later calls close the connection they get.
    void stop();

    size_t size() const;

private:
    struct Entry {
        Connection connection;
        Clock::time_point deadline;
        bool lingering;
    };
    void add(Connection connection, Clock::time_point deadline, bool lingering);
    void run();
    void forget(int fd);  // with mutex_ held

    const size_t max_idle_;
    const std::function<void(Connection)> resume_;
    const int epoll_;
    const int wake_;  // eventfd: stop() interrupts the wait
    mutable std::mutex mutex_;
    std::unordered_map<int, Entry> entries_;
    bool stopped_ = false;
    std::thread thread_;
};

}  // namespace server
