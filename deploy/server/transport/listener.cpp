// listener.cpp — see listener.h.
#include "listener.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <utility>

namespace server::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct Listener::Io {
    asio::io_context context;
    tcp::acceptor acceptor{context};
    asio::steady_timer retry{context};  // after a failed accept (out of descriptors): try again shortly

    void accept(const std::shared_ptr<ListenerState> &state) {
        acceptor.async_accept(
            asio::make_strand(context), [this, state](const boost::system::error_code &ec, tcp::socket socket) {
                if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
                if (ec) {
                    spdlog::warn("event=accept_failed error=\"{}\"", ec.message());
                    retry.expires_after(std::chrono::milliseconds(50));
                    return retry.async_wait([this, state](const boost::system::error_code &e) {
                        if (!e) accept(state);
                    });
                }
                // At the cap a connection waiting for its next request makes room; without one the new
                // connection is closed before a byte is read.
                if (state->connections.load() < state->limits.max_connections || state->idle.close_oldest()) {
                    serve_connection(std::move(socket), state);
                } else {
                    boost::system::error_code ignored;
                    socket.close(ignored);
                }
                accept(state);
            });
    }
};

Listener::Listener(const Limits &limits, Router router, ErrorBody error_body, size_t io_threads, size_t workers)
    : state_(std::make_shared<ListenerState>()),
      io_(std::make_unique<Io>()),
      workers_(workers),
      io_threads_(io_threads) {
    state_->limits = limits;
    state_->router = std::move(router);
    state_->error_body = std::move(error_body);
    state_->workers = &workers_;
}

Listener::~Listener() {
    try {
        stop();
    } catch (...) {  // a thread that cannot be joined as the process ends: nothing left to do about it
        spdlog::error("event=listener_stop_failed");
    }
}

int Listener::bind(const std::string &host, int port) {
    boost::system::error_code ec;
    tcp::resolver resolver(io_->context);
    const auto endpoints = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
    if (ec || endpoints.empty()) {
        spdlog::critical("event=bind_failed host={} port={} error=\"{}\"", host, port, ec.message());
        return -1;
    }
    const tcp::endpoint endpoint = *endpoints.begin();
    io_->acceptor.open(endpoint.protocol(), ec);
    if (!ec) io_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) io_->acceptor.bind(endpoint, ec);
    if (!ec) io_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
        spdlog::critical("event=bind_failed host={} port={} error=\"{}\"", host, port, ec.message());
        return -1;
    }
    return io_->acceptor.local_endpoint().port();
}

void Listener::start() {
    io_->accept(state_);
    for (size_t i = 0; i < io_threads_; ++i) threads_.emplace_back([this] { io_->context.run(); });
}

void Listener::stop() {
    if (stopped_) return;
    stopped_ = true;
    asio::post(io_->context, [this] {
        boost::system::error_code ignored;
        io_->acceptor.close(ignored);
        io_->retry.cancel();
    });
    workers_.stop();      // the routes still running end and write their answers (I/O still runs)
    io_->context.stop();  // then every connection ends where it is
    for (std::thread &t : threads_)
        if (t.joinable()) t.join();
}

bool Listener::saturated() const {
    // Idle connections do not count: one of them makes room for a new client.
    const size_t open = state_->connections.load();
    const size_t busy = open - std::min(open, state_->idle.size());
    return busy >= state_->limits.max_connections || workers_.idle() == 0;
}

size_t Listener::connections() const { return state_->connections.load(); }

}  // namespace server::http
