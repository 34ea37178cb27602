// request.h — the body of POST /v1/generate and its checks. Needs no runtime:
// the fuzzer (fuzz/fuzz_request.cpp) builds this file alone.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace server {

// A request the client must fix (HTTP 400); the message says what.
struct BadRequest : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct GenerateRequest {
    std::string prompt;
    int max_tokens = 64;
    float temperature = 1.0f;
    int top_k = 0;
    float top_p = 1.0f;
    uint64_t seed = 0;
    bool stream = false;
};

// Parses the JSON body. Unknown fields, wrong types and out-of-range values are
// BadRequest; `max_tokens_limit` caps max_tokens.
GenerateRequest parse_generate_request(const std::string &body, int max_tokens_limit);

}  // namespace server
