// guarded_server.h — httplib::Server with bounded requests and cheap idle
// connections. It replaces the library's per-connection loop (the virtual
// process_and_close_socket, as httplib's own SSLServer does) with one that reads
// each request through a GuardedConnection (limits on the head and body, see
// guarded_connection.h) and parks connections between requests in IdleConnections,
// so a worker is held only while a request is being read, handled or answered.
//
// Refused requests get their status here: 431 (head too large), 408 (head too
// slow), 413 (body too large), in place of httplib's 400, before the error handler
// set with set_error_handler() writes the body; and 415 for a body with a
// Content-Encoding, before any route reads it: the library inflates gzip and brotli
// bodies, and on a route without a capped reader 400 KB of gzip became 350 MB of
// req.body. A refused connection is closed after its reply, lingering so that the
// client can read it.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>

#include "guarded_connection.h"

namespace server {

class GuardedQueue;

class GuardedServer : public httplib::Server {
public:
    // `threads` workers; at most `max_idle` connections wait between requests (then the oldest closes).
    // 0: a quarter of the open-file limit, at most 1024, so that idle clients cannot use up the
    // descriptors that accept() and the model's files need.
    GuardedServer(const RequestLimits &limits, size_t threads, size_t max_idle = 0);
    ~GuardedServer() override;
    GuardedServer(const GuardedServer &) = delete;
    GuardedServer &operator=(const GuardedServer &) = delete;

    // As httplib's, after the status of a refused request has been set (so `handler` sees 431/408/413).
    httplib::Server &set_error_handler(Handler handler);
    // As httplib's, for requests whose body encoding was not refused.
    httplib::Server &set_pre_routing_handler(HandlerWithResponse handler);

    const RequestLimits &limits() const { return limits_; }

private:
    friend class GuardedQueue;  // resumes parked connections through serve()
    // The worker pool is this class's (it parks idle connections): another one would bypass it.
    using httplib::Server::new_task_queue;

    bool process_and_close_socket(socket_t sock) override;
    // Serves requests on `connection` until it must close or no request is waiting (then it is parked).
    void serve(std::shared_ptr<GuardedConnection> connection);

    const RequestLimits limits_;
    const size_t threads_;
    const size_t max_idle_;
    std::atomic<GuardedQueue *> queue_{nullptr};  // alive while the server listens
};

// For a handler that stops reading its request before the end (a body over its cap): the connection
// closes after this response instead of reading the rest as the next request. No-op outside a
// GuardedServer's worker.
void close_connection_after_response();
// Why the request on this thread's connection was stopped (Refusal::none outside a GuardedServer).
Refusal current_refusal();

}  // namespace server
