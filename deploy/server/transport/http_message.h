// http_message.h — what the transport hands a route and what the route hands back:
// a request read whole (head and body within their limits), and a response that is
// either a body or a stream of chunks (server-sent events). No HTTP library's types
// appear here, so the API layer does not depend on the transport's library.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace server::http {

struct Request {
    std::string method;          // "GET", "POST", ...
    std::string path;            // the target without its query
    std::string remote_addr;     // the peer's address, e.g. "127.0.0.1" (for the log)
    bool from_loopback = false;  // the peer is this machine (transport/peer.h)
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    // Set by the transport when the client closes its side while a route that runs on a worker is
    // still handling the request: a generation then ends early instead of writing to nobody.
    std::shared_ptr<const std::atomic<bool>> hung_up;

    // The first header of that name (case-insensitive), "" when absent.
    std::string header(std::string_view name) const;
    bool client_hung_up() const { return hung_up && hung_up->load(); }
};

// Chunks of a streamed response body, each sent (and flushed) when written.
class StreamWriter {
public:
    virtual ~StreamWriter() = default;
    // False once the client is gone or a write timed out: stop producing.
    virtual bool write(std::string_view data) = 0;
};

struct Response {
    int status = 200;
    std::string content_type = "text/plain";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    // When set, the body is this producer's output, sent chunked as it is written; it runs on the
    // route's thread after the status line and headers are out.
    std::function<void(StreamWriter &)> stream;

    void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
    void set_content(std::string content, std::string type) {
        body = std::move(content);
        content_type = std::move(type);
    }
};

using Handler = std::function<void(const Request &, Response &)>;

}  // namespace server::http
