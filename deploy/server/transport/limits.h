// limits.h — what one listener allows a client: the size and time of a request's
// head and body, idle keep-alive, writes, and how many connections at once. Every
// limit is enforced by the transport before a route sees the request.
#pragma once

#include <chrono>
#include <cstddef>

namespace server::http {

struct Limits {
    size_t max_head_bytes = 16 * 1024;  // request line + header lines (then 431)
    size_t max_header_lines = 100;      // (then 431)
    size_t max_body_bytes = 64 * 1024;  // decoded body, any transfer encoding (then 413)
    // Whole-request deadlines, not per read: from the head's first byte to its blank line, and from
    // there to the body's last byte (then 408).
    std::chrono::milliseconds head_timeout{10'000};
    std::chrono::milliseconds body_timeout{30'000};
    std::chrono::milliseconds idle_timeout{5'000};    // a connection with no request begun is closed after it
    std::chrono::milliseconds write_timeout{30'000};  // one write of a response or a stream's chunk
    size_t max_requests_per_connection = 100;
    size_t max_connections = 1024;  // beyond it a new connection is closed at once
};

}  // namespace server::http
