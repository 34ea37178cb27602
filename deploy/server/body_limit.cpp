// body_limit.cpp — see body_limit.h.
#include "body_limit.h"

#include <strings.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "guarded_server.h"

namespace server {

namespace {

// What the request's Content-Length says about its body: 0 when it has none (or is chunked, where httplib
// ignores the length), 413 above `max_bytes`, 400 when it is not a plain decimal number.
int declared_length_status(const httplib::Request &req, size_t max_bytes) {
    if (!req.has_header("Content-Length") ||
        strcasecmp(req.get_header_value("Transfer-Encoding").c_str(), "chunked") == 0)
        return 0;
    const std::string value = req.get_header_value("Content-Length");
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) return 400;
    char *end = nullptr;
    errno = 0;
    const unsigned long long length = std::strtoull(value.c_str(), &end, 10);
    return errno == ERANGE || length > max_bytes ? 413 : 0;
}

void refuse(httplib::Response &res, int status) {
    res.status = status;
    close_connection_after_response();
}

}  // namespace

void post_with_body_limit(httplib::Server &server, const std::string &pattern, size_t max_bytes,
                          httplib::Server::Handler handler) {
    server.Post(pattern, [max_bytes, handler = std::move(handler)](const httplib::Request &req, httplib::Response &res,
                                                                   const httplib::ContentReader &read) {
        if (req.is_multipart_form_data()) return refuse(res, 415);  // httplib's multipart reader needs callbacks
        if (const int status = declared_length_status(req, max_bytes)) return refuse(res, status);
        std::string body;
        bool over = false;
        const bool complete = read([&](const char *data, size_t size) {
            if (size > max_bytes - body.size()) return !(over = true);
            body.append(data, size);
            return true;
        });
        if (over || current_refusal() == Refusal::body_too_large) return refuse(res, 413);
        if (!complete) return refuse(res, 400);
        httplib::Request with_body = req;
        with_body.body = std::move(body);
        handler(with_body, res);
    });
}

}  // namespace server
