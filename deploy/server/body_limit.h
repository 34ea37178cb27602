// body_limit.h — POST routes whose body is capped as it arrives, whatever its
// transfer encoding. httplib 0.11.4's set_payload_max_length checks only a
// Content-Length: a chunked body was appended to req.body without limit (300 MiB
// were accepted). A route registered here reads through httplib's ContentReader
// and stops at the cap:
//   - a Content-Length above the cap: 413 before a byte of the body is read;
//   - a chunked (or undelimited) body: counted as it is decoded, 413 at the first
//     byte past the cap, never more than the cap buffered;
//   - multipart/form-data: 415 (the JSON routes take none);
//   - a body that breaks off or is malformed: 400.
// The refusals leave the response body empty, so the server's error handler
// writes it, and close the connection after the reply (the rest of the body is
// never read as a next request).
#pragma once

#include <httplib.h>

#include <cstddef>
#include <string>

namespace server {

// Registers `handler` for POST `pattern` on `server`; it runs only for bodies of at most `max_bytes`,
// which it finds in req.body as with httplib's plain Post().
void post_with_body_limit(httplib::Server &server, const std::string &pattern, size_t max_bytes,
                          httplib::Server::Handler handler);

}  // namespace server
