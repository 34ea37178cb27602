// connection.cpp — see connection.h. One request's path through a connection:
//   wait_for_request  idle until the first byte (idle_timeout; silent close)
//   read_head         request line and headers by the head's deadline (408), within size and count (431);
//                     Beast's parser refuses conflicting Content-Length and Content-Length with
//                     Transfer-Encoding (400), the checks here a Content-Encoding (415), a Transfer-Encoding
//                     other than chunked (400) and a declared length over the cap (413)
//   read_body         the body by its own deadline (408), within the cap as decoded (413)
//   dispatch          the route, on this I/O thread or on a worker
//   send / stream     the response, or its chunks as a worker writes them; then the next request or close
// Every refusal answers, shuts the write side and drops what the client still sends for a moment, so that
// the client reads the answer instead of a reset.
#include "connection.h"

#include <strings.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <future>
#include <optional>
#include <utility>

#include "peer.h"

namespace server::http {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

constexpr std::chrono::seconds kLinger{2};

bool equals_ignoring_case(beast::string_view a, const char *b) { return beast::iequals(a, beast::string_view(b)); }

std::string seconds_text(std::chrono::milliseconds d) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", static_cast<double>(d.count()) / 1000);
    return text;
}

// The end of a connection the client closed or reset: nothing to answer.
bool client_left(const beast::error_code &ec) {
    return ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message || ec == asio::error::eof ||
           ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
           ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor;
}

class Connection : public std::enable_shared_from_this<Connection> {
public:
    Connection(tcp::socket socket, std::shared_ptr<ListenerState> state)
        : stream_(std::move(socket)),
          deadline_(stream_.get_executor()),
          state_(std::move(state)),
          limits_(state_->limits) {
        ++state_->connections;
        beast::error_code ec;
        stream_.set_option(tcp::no_delay(true), ec);  // each streamed token leaves at once
        const tcp::endpoint peer = stream_.remote_endpoint(ec);
        if (!ec) {
            remote_addr_ = peer.address().to_string();
            from_loopback_ = is_loopback_peer(peer.address());
        }
    }
    ~Connection() {
        state_->idle.remove(idle_ticket_);
        --state_->connections;
    }
    Connection(const Connection &) = delete;
    Connection &operator=(const Connection &) = delete;

    void start() { wait_for_request(); }

    // From a worker: runs on the connection's strand, then waits for the write to end. False when the
    // client is gone or the write timed out.
    bool write_from_worker(std::string bytes) {
        auto done = std::make_shared<std::promise<bool>>();
        std::future<bool> written = done->get_future();
        asio::post(stream_.get_executor(), [self = shared_from_this(), done, bytes = std::move(bytes)]() mutable {
            auto data = std::make_shared<std::string>(std::move(bytes));
            self->arm(self->limits_.write_timeout);
            asio::async_write(self->stream_, asio::buffer(*data),
                              [self, done, data](const beast::error_code &ec, size_t) {
                                  self->disarm();
                                  done->set_value(!ec);
                              });
        });
        // The write's own deadline ends it; the margin covers an I/O thread that stopped.
        if (written.wait_for(limits_.write_timeout + std::chrono::seconds(5)) != std::future_status::ready)
            return false;
        const bool ok = written.get();
        if (!ok) hung_up_->store(true);
        return ok;
    }

    // From a worker, once the route's response is complete: on the strand, the next request or the close.
    void finish_from_worker(bool ok) {
        asio::post(stream_.get_executor(), [self = shared_from_this(), ok] {
            if (!ok) return self->close();
            self->after_response();
        });
    }

    // From a worker: a whole response, written on the strand.
    void send_from_worker(std::shared_ptr<Response> res) {
        asio::post(stream_.get_executor(), [self = shared_from_this(), res = std::move(res)] { self->send(*res); });
    }

    std::string stream_head(const Response &res) const {
        std::string head =
            "HTTP/1.1 " + std::to_string(res.status) + " " +
            std::string(bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(res.status)))) +
            "\r\nContent-Type: " + res.content_type + "\r\nTransfer-Encoding: chunked\r\n";
        for (const auto &[name, value] : res.headers) head += name + ": " + value + "\r\n";
        head += keep_alive_ ? "\r\n" : "Connection: close\r\n\r\n";
        return head;
    }

private:
    void wait_for_request() {
        if (buffer_.size() > 0) return read_head();  // the next request came with the last one
        arm(limits_.idle_timeout);
        // At the connection cap, the listener may close this one for a new client (idle_set.h).
        idle_ticket_ = state_->idle.add([weak = weak_from_this()](uint64_t ticket) {
            const auto self = weak.lock();
            if (!self) return;
            asio::post(self->stream_.get_executor(), [self, ticket] {
                if (self->idle_ticket_ == ticket) self->close();  // not if a request began meanwhile
            });
        });
        stream_.async_read_some(buffer_.prepare(4096),
                                [self = shared_from_this()](const beast::error_code &ec, size_t n) {
                                    self->state_->idle.remove(self->idle_ticket_);
                                    self->idle_ticket_ = 0;
                                    self->disarm();
                                    if (ec) return self->close();  // idle too long, or gone: no request to answer
                                    self->buffer_.commit(n);
                                    self->read_head();
                                });
    }

    void read_head() {
        path_.clear();
        parser_.emplace();
        parser_->header_limit(static_cast<uint32_t>(limits_.max_head_bytes));
        parser_->body_limit(limits_.max_body_bytes);
        arm(limits_.head_timeout);
        bhttp::async_read_header(stream_, buffer_, *parser_,
                                 [self = shared_from_this()](const beast::error_code &ec, size_t) {
                                     self->disarm();
                                     self->on_head(ec);
                                 });
    }

    void on_head(const beast::error_code &ec) {
        if (timed_out_)
            return refuse(408,
                          "request line and headers took longer than " + seconds_text(limits_.head_timeout) + " s");
        if (ec == bhttp::error::header_limit) return refuse(431, head_limit_message());
        // A declared Content-Length over the cap: refused before a byte of the body is read.
        if (ec == bhttp::error::body_limit) return refuse(413, body_limit_message());
        if (client_left(ec)) return close();
        if (ec == bhttp::error::multiple_content_length)
            return refuse(400, "conflicting Content-Length headers: a request has one length");
        if (ec == bhttp::error::bad_transfer_encoding || ec == bhttp::error::bad_content_length)
            return refuse(
                400, "a request has one Content-Length or Transfer-Encoding: chunked, not both (" + ec.message() + ")");
        if (ec) return refuse(400, "malformed request head: " + ec.message());

        const auto &req = parser_->get();
        path_ = std::string(req.target().substr(0, req.target().find('?')));
        if (static_cast<size_t>(std::distance(req.begin(), req.end())) > limits_.max_header_lines)
            return refuse(431, head_limit_message());
        if (req.count(bhttp::field::transfer_encoding) > 0 &&
            (req.count(bhttp::field::transfer_encoding) > 1 ||
             !equals_ignoring_case(req[bhttp::field::transfer_encoding], "chunked")))
            return refuse(400, "the only Transfer-Encoding taken is 'chunked'");
        const auto encoding = req[bhttp::field::content_encoding];
        const auto type = req[bhttp::field::content_type];
        if ((!encoding.empty() && !equals_ignoring_case(encoding, "identity")) ||
            (type.size() >= 10 && equals_ignoring_case(type.substr(0, 10), "multipart/")))
            return refuse(415, "request bodies are plain JSON: no Content-Encoding, no multipart/form-data");
        if (const auto length = parser_->content_length(); length && *length > limits_.max_body_bytes)
            return refuse(413, body_limit_message());
        if (equals_ignoring_case(req[bhttp::field::expect], "100-continue") && !parser_->is_done()) {
            // The client waits for this before it sends the body (curl does for bodies over 1 KiB).
            static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
            arm(limits_.write_timeout);
            return asio::async_write(stream_, asio::buffer(kContinue),
                                     [self = shared_from_this()](const beast::error_code &write_error, size_t) {
                                         self->disarm();
                                         if (write_error) return self->close();
                                         self->read_body();
                                     });
        }
        read_body();
    }

    void read_body() {
        if (parser_->is_done()) return dispatch();
        arm(limits_.body_timeout);
        bhttp::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](const beast::error_code &ec, size_t) {
            self->disarm();
            self->on_body(ec);
        });
    }

    void on_body(const beast::error_code &ec) {
        if (timed_out_)
            return refuse(408, "request body took longer than " + seconds_text(limits_.body_timeout) + " s");
        if (ec == bhttp::error::body_limit) return refuse(413, body_limit_message());
        if (client_left(ec)) return close();
        if (ec) return refuse(400, "malformed request body: " + ec.message());
        dispatch();
    }

    void dispatch() {
        auto &msg = parser_->get();
        version_ = msg.version();
        keep_alive_ = msg.keep_alive() && ++served_ < limits_.max_requests_per_connection;
        Request req;
        req.method = std::string(msg.method_string());
        req.path = path_;
        req.remote_addr = remote_addr_;
        req.from_loopback = from_loopback_;
        for (const auto &field : msg)
            req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
        req.body = std::move(msg.body());
        parser_.reset();

        const Route *route = state_->router.find(req.method, req.path);
        if (route == nullptr) {
            Response res;
            state_->error_body(res, 404, "no such endpoint: " + req.method + " " + req.path, req.path);
            return send(res);
        }
        if (route->runs_on == RunsOn::io_thread) {
            Response res;
            run_route(*route, req, res);
            return send(res);
        }
        hung_up_ = std::make_shared<std::atomic<bool>>(false);
        req.hung_up = hung_up_;
        watch_for_hang_up(served_);
        state_->workers->submit(
            [self = shared_from_this(), route, req = std::move(req)] { self->on_worker(*route, req); });
    }

    void run_route(const Route &route, const Request &req, Response &res) const {
        try {
            route.handler(req, res);
        } catch (const std::exception &e) {
            res = Response{};
            state_->error_body(res, 500, std::string("internal error: ") + e.what(), req.path);
        }
    }

    // On a worker thread.
    void on_worker(const Route &route, const Request &req);

    // Notices a client that closes its side while its request is being handled; stops at the next request.
    void watch_for_hang_up(size_t request) {
        watching_ = true;
        stream_.async_wait(tcp::socket::wait_read, [self = shared_from_this(), request](const beast::error_code &ec) {
            if (ec || !self->watching_ || request != self->served_) return;
            char byte = 0;
            const ssize_t n = ::recv(self->stream_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                self->hung_up_->store(true);
                return;
            }
            if (n < 0) self->watch_for_hang_up(request);  // woken without data: wait again
            // n > 0: the next request is already coming; it waits in the socket for this one's answer.
        });
    }

    void send(Response &res) {
        auto msg = std::make_shared<bhttp::response<bhttp::string_body>>(
            bhttp::int_to_status(static_cast<unsigned>(res.status)), version_ == 10 ? 10 : 11);
        msg->set(bhttp::field::content_type, res.content_type);
        for (const auto &[name, value] : res.headers) msg->insert(name, value);
        msg->body() = std::move(res.body);
        msg->keep_alive(keep_alive_);
        msg->prepare_payload();
        arm(limits_.write_timeout);
        bhttp::async_write(stream_, *msg, [self = shared_from_this(), msg](const beast::error_code &ec, size_t) {
            self->disarm();
            if (ec) return self->close();
            self->after_response();
        });
    }

    void after_response() {
        if (watching_) {
            watching_ = false;
            beast::error_code ec;
            stream_.cancel(ec);  // the hang-up watch: nothing else is outstanding now
        }
        if (!keep_alive_) {
            beast::error_code ec;
            stream_.shutdown(tcp::socket::shutdown_send, ec);
            return close();
        }
        wait_for_request();
    }

    // Answers `status` with the API's error body, then closes: what follows in the stream is not read as a
    // request.
    void refuse(int status, const std::string &message) {
        Response res;
        state_->error_body(res, status, message, path_);
        keep_alive_ = false;
        auto msg = std::make_shared<bhttp::response<bhttp::string_body>>(
            bhttp::int_to_status(static_cast<unsigned>(status)), 11);
        msg->set(bhttp::field::content_type, res.content_type);
        msg->body() = std::move(res.body);
        msg->keep_alive(false);
        msg->prepare_payload();
        arm(limits_.write_timeout);
        bhttp::async_write(stream_, *msg, [self = shared_from_this(), msg](const beast::error_code &ec, size_t) {
            self->disarm();
            if (ec) return self->close();
            beast::error_code ignored;
            self->stream_.shutdown(tcp::socket::shutdown_send, ignored);
            self->arm(kLinger);
            self->linger();
        });
    }

    // Drops what the client still sends until it stops or the linger time is over.
    void linger() {
        stream_.async_read_some(asio::buffer(discard_),
                                [self = shared_from_this()](const beast::error_code &ec, size_t) {
                                    if (ec) return self->close();
                                    self->linger();
                                });
    }

    void close() {
        watching_ = false;
        disarm();
        beast::error_code ignored;
        stream_.close(ignored);
    }

    // The deadline of the operation about to start: when it passes, the operation is cancelled and ends with
    // timed_out_ set, so that a 408 can still be written (a closed socket could not answer).
    void arm(std::chrono::steady_clock::duration timeout) {
        timed_out_ = false;
        deadline_.expires_after(timeout);
        deadline_.async_wait([self = shared_from_this(), armed = ++armed_](const beast::error_code &ec) {
            if (ec || armed != self->armed_) return;  // disarmed or re-armed since
            self->timed_out_ = true;
            beast::error_code ignored;
            self->stream_.cancel(ignored);
        });
    }
    void disarm() {
        ++armed_;
        deadline_.cancel();
    }

    std::string head_limit_message() const {
        return "request head exceeds " + std::to_string(limits_.max_head_bytes) + " bytes or " +
               std::to_string(limits_.max_header_lines) + " header lines";
    }
    std::string body_limit_message() const {
        return "request body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes";
    }

    tcp::socket stream_;
    asio::steady_timer deadline_;
    uint64_t armed_ = 0;  // which arm() the pending wait belongs to
    bool timed_out_ = false;
    uint64_t idle_ticket_ = 0;  // in state_->idle while waiting for a request
    const std::shared_ptr<ListenerState> state_;
    const Limits &limits_;
    std::string remote_addr_;
    bool from_loopback_ = false;
    beast::flat_buffer buffer_;
    std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
    std::string path_;  // the current request's
    unsigned version_ = 11;
    bool keep_alive_ = false;
    size_t served_ = 0;
    bool watching_ = false;
    std::shared_ptr<std::atomic<bool>> hung_up_ = std::make_shared<std::atomic<bool>>(false);
    std::array<char, 4096> discard_{};
};

// The chunks of a streamed response, each written before write() returns.
class ChunkWriter final : public StreamWriter {
public:
    explicit ChunkWriter(Connection &connection) : connection_(connection) {}
    bool write(std::string_view data) override {
        if (!ok_ || data.empty()) return ok_;
        char size[24];
        std::snprintf(size, sizeof size, "%zx\r\n", data.size());
        std::string chunk = size;
        chunk.append(data);
        chunk += "\r\n";
        ok_ = connection_.write_from_worker(std::move(chunk));
        return ok_;
    }
    bool ok() const { return ok_; }

private:
    Connection &connection_;
    bool ok_ = true;
};

void Connection::on_worker(const Route &route, const Request &req) {
    auto res = std::make_shared<Response>();
    run_route(route, req, *res);
    if (!res->stream) return send_from_worker(std::move(res));
    ChunkWriter writer(*this);
    bool ok = write_from_worker(stream_head(*res));
    if (ok) {
        try {
            res->stream(writer);
        } catch (const std::exception &) {
            ok = false;  // the status line is out: all that is left is to end the connection
        }
        ok = ok && writer.ok() && write_from_worker("0\r\n\r\n");
    }
    finish_from_worker(ok);
}

}  // namespace

void serve_connection(tcp::socket socket, const std::shared_ptr<ListenerState> &state) {
    std::make_shared<Connection>(std::move(socket), state)->start();
}

}  // namespace server::http
