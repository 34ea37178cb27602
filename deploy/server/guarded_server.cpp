// guarded_server.cpp — see guarded_server.h.
#include "guarded_server.h"

#include <spdlog/spdlog.h>
#include <strings.h>
#include <sys/resource.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "idle_connections.h"

namespace server {

namespace {

// How long a refused connection's unread input is drained so that the client reads the reply.
constexpr std::chrono::seconds kLinger{2};

// The connection this thread is serving a request on: handlers reach it through the functions below.
thread_local GuardedConnection *current_connection = nullptr;

int refusal_status(Refusal refusal, int status) {
    switch (refusal) {
        case Refusal::head_too_large: return status == 414 ? 414 : 431;
        case Refusal::head_too_slow: return 408;
        case Refusal::body_too_large: return 413;
        case Refusal::none: break;
    }
    return status;
}

size_t default_max_idle() {
    rlimit files{};
    if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return 1024;
    return std::max<size_t>(16, std::min<size_t>(1024, static_cast<size_t>(files.rlim_cur / 4)));
}

}  // namespace

// The worker pool and the idle connections of one listen(): the pool's shutdown first closes the idle
// connections, so that none is handed to a worker that is gone.
class GuardedQueue final : public httplib::TaskQueue {
public:
    GuardedQueue(size_t threads, size_t max_idle, GuardedServer *server)
        : pool_(threads), idle_(max_idle, [this, server](IdleConnections::Connection c) {
              pool_.enqueue([server, c]() mutable { server->serve(std::move(c)); });
          }) {}
    void enqueue(std::function<void()> fn) override { pool_.enqueue(std::move(fn)); }
    void shutdown() override {
        idle_.stop();
        pool_.shutdown();
    }
    IdleConnections &idle() { return idle_; }

private:
    httplib::ThreadPool pool_;
    IdleConnections idle_;
};

GuardedServer::GuardedServer(const RequestLimits &limits, size_t threads, size_t max_idle)
    : limits_(limits), threads_(threads), max_idle_(max_idle != 0 ? max_idle : default_max_idle()) {
    new_task_queue = [this] {
        auto *queue = new GuardedQueue(threads_, max_idle_, this);
        queue_ = queue;
        return queue;
    };
    set_error_handler([](const httplib::Request &, httplib::Response &) {});
    set_pre_routing_handler(nullptr);
}

GuardedServer::~GuardedServer() = default;

httplib::Server &GuardedServer::set_error_handler(Handler handler) {
    return httplib::Server::set_error_handler(
        [handler = std::move(handler)](const httplib::Request &req, httplib::Response &res) {
            // httplib's own 400 and 414 (a request it could not parse) leave the connection somewhere
            // inside that request: what follows is not the next request.
            if (res.body.empty() && (res.status == 400 || res.status == 414)) close_connection_after_response();
            res.status = refusal_status(current_refusal(), res.status);
            if (current_connection != nullptr && current_connection->must_close())
                res.set_header("Connection", "close");
            handler(req, res);
        });
}

httplib::Server &GuardedServer::set_pre_routing_handler(HandlerWithResponse handler) {
    return httplib::Server::set_pre_routing_handler(
        [handler = std::move(handler)](const httplib::Request &req, httplib::Response &res) {
            const std::string encoding = req.get_header_value("Content-Encoding");
            if (!encoding.empty() && strcasecmp(encoding.c_str(), "identity") != 0) {
                res.status = 415;
                close_connection_after_response();
                return HandlerResponse::Handled;
            }
            return handler ? handler(req, res) : HandlerResponse::Unhandled;
        });
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
    RequestLimits limits = limits_;  // the timeouts as set_read_timeout and set_write_timeout left them
    limits.read_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::seconds(read_timeout_sec_) + std::chrono::microseconds(read_timeout_usec_));
    limits.write_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::seconds(write_timeout_sec_) + std::chrono::microseconds(write_timeout_usec_));
    serve(std::make_shared<GuardedConnection>(sock, limits, keep_alive_max_count_));
    return true;
}

void GuardedServer::serve(std::shared_ptr<GuardedConnection> connection) {
    GuardedQueue *queue = queue_;
    try {
        while (svr_sock_ != INVALID_SOCKET && connection->requests_left() > 0) {
            if (!connection->request_waiting()) {
                queue->idle().wait_for_request(
                    std::move(connection),
                    IdleConnections::Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_));
                return;
            }
            connection->begin_request();
            bool client_closes = false;
            current_connection = connection.get();
            const bool ok = process_request(*connection, connection->requests_left() == 1, client_closes, nullptr);
            current_connection = nullptr;
            connection->count_request();
            if (connection->must_close()) {
                queue->idle().linger(std::move(connection), IdleConnections::Clock::now() + kLinger);
                return;
            }
            if (!ok || client_closes) return;  // closed as `connection` goes
        }
    } catch (const std::exception &e) {  // a worker must not die: the connection closes instead
        current_connection = nullptr;
        spdlog::error("event=connection_error error=\"{}\"", e.what());
    }
}

void close_connection_after_response() {
    if (current_connection != nullptr) current_connection->close_after_response();
}

Refusal current_refusal() { return current_connection != nullptr ? current_connection->refusal() : Refusal::none; }

}  // namespace server
