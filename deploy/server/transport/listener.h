// listener.h — one listening port on Boost.Beast (Asio): its I/O threads accept and
// read connections under the limits of limits.h, its worker pool runs the routes
// that wait. gpt-server has two: the main port, and the health port (--health-port)
// for probes, each with its own threads so that a saturated main port cannot delay a
// probe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "connection.h"
#include "limits.h"
#include "router.h"
#include "worker_pool.h"

namespace server::http {

class Listener {
public:
    Listener(const Limits &limits, Router router, ErrorBody error_body, size_t io_threads, size_t workers);
    ~Listener();  // stop()
    Listener(const Listener &) = delete;
    Listener &operator=(const Listener &) = delete;

    // Binds host:port (0 = any free port) and returns the port; -1 on failure (logged).
    int bind(const std::string &host, int port);
    // Accepts and serves on the I/O threads until stop().
    void start();
    // Stops accepting, lets the workers finish what they run, then ends every connection.
    void stop();

    // True when a new request could not start at once: every worker busy, or the connection cap reached by
    // connections that are not idle.
    bool saturated() const;
    size_t connections() const;

private:
    struct Io;  // Asio's objects, kept out of this header
    std::shared_ptr<ListenerState> state_;
    std::unique_ptr<Io> io_;
    WorkerPool workers_;  // after io_: a task left after stop() holds a connection, which io_ must outlive
    std::vector<std::thread> threads_;
    const size_t io_threads_;
    bool stopped_ = false;
};

}  // namespace server::http
