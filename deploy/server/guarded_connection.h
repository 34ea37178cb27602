// guarded_connection.h — one client connection as the httplib::Stream that
// httplib's request parser reads, with the limits the compiled cpp-httplib 0.11.4
// lacks: Debian ships it as a shared library, so CPPHTTPLIB_* macros set before the
// include change nothing, and that build reads a header line of any length before
// checking it, any number of header lines, and a chunked body of any size.
//
// Here every byte httplib consumes is counted as it is handed over: the request
// head (request line and header lines) stops at `max_head_bytes`, `max_header_lines`
// or `head_timeout`, and the body phase at `max_body_wire_bytes`. A stopped head
// reads as end of input, so httplib answers 400 (or 414), which the server reports
// as 431 or 408 (refusal()); a stopped body is a read error. The connection also
// keeps its own 4 KiB read buffer across requests, so pipelined requests survive a
// wait between them (see idle_connections.h).
#pragma once

#include <httplib.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace server {

struct RequestLimits {
    size_t max_head_bytes = 16 * 1024;  // request line + header lines, line ends included
    size_t max_header_lines = 100;
    // Body bytes off the socket, chunk framing included: a backstop for routes that let httplib buffer
    // the body (any method and path without a capped reader, see body_limit.h).
    uint64_t max_body_wire_bytes = 8 * 64 * 1024 + 64 * 1024;
    std::chrono::milliseconds head_timeout{10'000};  // from the head's first byte to its blank line
    // Any one wait for bytes to read or room to write (GuardedServer takes them from httplib's settings).
    std::chrono::milliseconds read_timeout{30'000};
    std::chrono::milliseconds write_timeout{30'000};
};

// Why the connection stopped reading a request; none while it is within its limits.
enum class Refusal { none, head_too_large, head_too_slow, body_too_large };

class GuardedConnection final : public httplib::Stream {
public:
    GuardedConnection(int fd, const RequestLimits &limits, size_t max_requests);
    ~GuardedConnection() override;  // closes the socket
    GuardedConnection(const GuardedConnection &) = delete;
    GuardedConnection &operator=(const GuardedConnection &) = delete;

    // httplib::Stream
    bool is_readable() const override;
    bool is_writable() const override;
    ssize_t read(char *ptr, size_t size) override;
    ssize_t write(const char *ptr, size_t size) override;
    void get_remote_ip_and_port(std::string &ip, int &port) const override;
    void get_local_ip_and_port(std::string &ip, int &port) const override;
    socket_t socket() const override { return fd_; }

    // Starts the accounting of the next request on this connection (its head's deadline included).
    void begin_request();
    Refusal refusal() const { return refusal_; }
    // True when the next request's first bytes are already here (buffered, or readable on the socket).
    bool request_waiting() const;
    // Requests this connection may still serve (keep-alive's maximum count); counts one down.
    size_t requests_left() const { return requests_left_; }
    void count_request() { --requests_left_; }
    // Set by a handler that stopped reading its request: the connection ends after the response.
    void close_after_response() { close_after_response_ = true; }
    bool must_close() const { return close_after_response_ || refusal_ != Refusal::none; }
    // Reads and drops what the client sends, without waiting; false once the client is done (EOF or error).
    bool discard_input();

private:
    // Refills the buffer, waiting at most the read timeout (and the head's deadline): bytes read, 0 at
    // the end of input, -1 on error or timeout.
    ssize_t fill();
    // Hands buffered head bytes over one at a time, so the head's end and limits fall on the right byte.
    size_t take_head(char *ptr, size_t size);

    const int fd_;
    const RequestLimits limits_;
    std::string remote_ip_, local_ip_;
    int remote_port_ = -1, local_port_ = -1;
    size_t requests_left_;
    bool close_after_response_ = false;

    std::array<char, 4096> buffer_{};
    size_t buffer_begin_ = 0, buffer_end_ = 0;

    // The current request.
    bool in_head_ = true;
    size_t head_bytes_ = 0;
    size_t lines_ = 0;      // completed lines, the request line included
    size_t line_size_ = 0;  // bytes of the current line so far
    char previous_ = 0;
    std::chrono::steady_clock::time_point head_deadline_{};
    uint64_t body_bytes_ = 0;
    Refusal refusal_ = Refusal::none;
};

}  // namespace server
