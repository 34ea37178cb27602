// guarded_connection.cpp — see guarded_connection.h.
#include "guarded_connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace server {

namespace {

using Clock = std::chrono::steady_clock;

// Numeric address and port of a socket's end (getsockname or getpeername), as httplib reports them.
template <typename Name>
void address_of(int fd, Name name, std::string *ip, int *port) {
    sockaddr_storage address{};
    socklen_t size = sizeof address;
    if (name(fd, reinterpret_cast<sockaddr *>(&address), &size) != 0) return;
    char host[NI_MAXHOST];
    char service[NI_MAXSERV];
    if (getnameinfo(reinterpret_cast<sockaddr *>(&address), size, host, sizeof host, service, sizeof service,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return;
    *ip = host;
    *port = std::atoi(service);
}

// poll() for `events` for at most `timeout` (never negative): true when they came.
bool wait_for(int fd, short events, std::chrono::milliseconds timeout) {
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(std::max<std::chrono::milliseconds::rep>(0, timeout.count()));
    int n;
    do {
        n = ::poll(&p, 1, ms);
    } while (n < 0 && errno == EINTR);
    return n > 0;
}

}  // namespace

GuardedConnection::GuardedConnection(int fd, const RequestLimits &limits, size_t max_requests)
    : fd_(fd), limits_(limits), requests_left_(max_requests) {
    address_of(fd_, ::getpeername, &remote_ip_, &remote_port_);
    address_of(fd_, ::getsockname, &local_ip_, &local_port_);
}

GuardedConnection::~GuardedConnection() { ::close(fd_); }

void GuardedConnection::begin_request() {
    in_head_ = true;
    head_bytes_ = lines_ = line_size_ = 0;
    previous_ = 0;
    body_bytes_ = 0;
    head_deadline_ = Clock::now() + limits_.head_timeout;
}

bool GuardedConnection::request_waiting() const {
    return buffer_begin_ < buffer_end_ || wait_for(fd_, POLLIN, std::chrono::milliseconds(0));
}

bool GuardedConnection::is_readable() const {
    return buffer_begin_ < buffer_end_ || wait_for(fd_, POLLIN, limits_.read_timeout);
}

bool GuardedConnection::is_writable() const {
    if (!wait_for(fd_, POLLOUT, limits_.write_timeout)) return false;
    // Like httplib's own stream: a client that has hung up is not writable, so a stream being sent to
    // it ends at its next event instead of filling the socket buffer first.
    if (!wait_for(fd_, POLLIN, std::chrono::milliseconds(0))) return true;
    char byte;
    const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));  // 0: the client has hung up
}

ssize_t GuardedConnection::fill() {
    while (true) {
        auto timeout = limits_.read_timeout;
        bool head_bound = false;  // the wait ends at the head's deadline, not the read timeout
        if (in_head_) {
            // A head trickling in keeps every single wait short: the deadline is for the whole head.
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(head_deadline_ - Clock::now());
            if (left.count() <= 0) {
                refusal_ = Refusal::head_too_slow;
                return -1;
            }
            if (left < timeout) {
                timeout = left;
                head_bound = true;
            }
        }
        if (!wait_for(fd_, POLLIN, timeout)) {
            if (head_bound) refusal_ = Refusal::head_too_slow;
            return -1;
        }
        const ssize_t n = ::recv(fd_, buffer_.data(), buffer_.size(), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;  // woken for nothing: wait again
        if (n <= 0) return n;
        buffer_begin_ = 0;
        buffer_end_ = static_cast<size_t>(n);
        return n;
    }
}

size_t GuardedConnection::take_head(char *ptr, size_t size) {
    size_t n = 0;
    while (n < size && in_head_ && buffer_begin_ < buffer_end_) {
        if (head_bytes_ == limits_.max_head_bytes) {
            refusal_ = Refusal::head_too_large;
            break;
        }
        const char c = buffer_[buffer_begin_++];
        ptr[n++] = c;
        ++head_bytes_;
        if (c != '\n') {
            ++line_size_;
            previous_ = c;
            continue;
        }
        // httplib ends the head at the first CRLF-only line after the request line; lines ending in a
        // bare LF are skipped by it, and counted here like any other.
        if (lines_ > 0 && line_size_ == 1 && previous_ == '\r') {
            in_head_ = false;
        } else if (++lines_ > limits_.max_header_lines + 1) {
            refusal_ = Refusal::head_too_large;
        }
        line_size_ = 0;
        previous_ = c;
        if (refusal_ != Refusal::none) break;
    }
    return n;
}

ssize_t GuardedConnection::read(char *ptr, size_t size) {
    if (size == 0) return 0;
    if (refusal_ == Refusal::head_too_large) return 0;  // the head ends here: httplib replies 400/414
    if (refusal_ != Refusal::none) return -1;
    if (buffer_begin_ == buffer_end_) {
        const ssize_t n = fill();
        if (n <= 0) return n;
    }
    if (in_head_) {
        const size_t n = take_head(ptr, size);
        // A head cut at its limit on this call's first byte: nothing more to hand over.
        return n == 0 && refusal_ == Refusal::head_too_large ? 0 : static_cast<ssize_t>(n);
    }
    const size_t n = std::min(size, buffer_end_ - buffer_begin_);
    if (n > limits_.max_body_wire_bytes - body_bytes_) {
        refusal_ = Refusal::body_too_large;
        return -1;
    }
    std::copy_n(buffer_.data() + buffer_begin_, n, ptr);
    buffer_begin_ += n;
    body_bytes_ += n;
    return static_cast<ssize_t>(n);
}

ssize_t GuardedConnection::write(const char *ptr, size_t size) {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
        n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
}

void GuardedConnection::get_remote_ip_and_port(std::string &ip, int &port) const {
    ip = remote_ip_;
    port = remote_port_;
}

void GuardedConnection::get_local_ip_and_port(std::string &ip, int &port) const {
    ip = local_ip_;
    port = local_port_;
}

bool GuardedConnection::discard_input() {
    buffer_begin_ = buffer_end_ = 0;
    // A bounded amount per call, so that one fast sender cannot keep the caller's thread to itself.
    for (int i = 0; i < 64; ++i) {
        const ssize_t n = ::recv(fd_, buffer_.data(), buffer_.size(), MSG_DONTWAIT);
        if (n == 0) return false;
        if (n < 0) return errno == EAGAIN || errno == EINTR;
    }
    return true;
}

}  // namespace server
