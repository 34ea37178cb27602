// admin_auth.h — who may call /admin/* and what they may load. Loopback is not
// authentication (any local user or a proxy on the host reaches loopback): a caller
// must also present the bearer token read from --admin-token-file, and a reload may
// only name a directory inside --models-root.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "transport/http_message.h"

namespace server {

// The answer to an admin request that is refused; status 0 lets it through.
struct AdminVerdict {
    int status = 0;
    std::string message;
    std::string www_authenticate;  // the WWW-Authenticate value a 401 carries
};

class AdminAccess {
public:
    // Reads the token from `token_file` and resolves `models_root`. Throws std::runtime_error naming the
    // problem: a token file that group or others may read or write (it must be 0600 or 0400), that is
    // not a regular file, is empty, longer than 4 KiB, holds whitespace or control characters inside the
    // token, or is shorter than 16 characters; a models root that is not a directory.
    AdminAccess(const std::string &token_file, const std::string &models_root);

    // Loopback (403 otherwise), then `Authorization: Bearer <token>` (401 when missing or wrong; the
    // comparison takes the same time wherever the tokens differ).
    AdminVerdict authorize(const http::Request &req) const;

    // The directory to load for a requested path: relative paths are taken under the models root, and
    // the path is resolved through every symbolic link; outside the root it is 403, when it cannot be
    // resolved (missing, unreadable) or holds a NUL byte (a JSON "\u0000", which the file system would cut the
    // path at) 400. On success `*resolved` is the resolved path.
    AdminVerdict resolve_model_path(const std::string &requested, std::string *resolved) const;

    const std::string &models_root() const { return models_root_; }

private:
    std::array<uint8_t, 32> token_digest_{};  // BLAKE2b of the token: compared digests have one length
    std::string models_root_;                 // resolved, no trailing '/'
};

}  // namespace server
