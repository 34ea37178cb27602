// request.h — the body of POST /v1/generate and its checks. Needs no runtime:
// the fuzzer (fuzz/fuzz_request.cpp) builds this file alone.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace server {

// A request the client must fix (HTTP 400, unless `code` says otherwise); the message says what,
// `param` names the field at fault (OpenAI's error.param) when there is one.
struct BadRequest : std::runtime_error {
    explicit BadRequest(const std::string &message, std::string param = "", int code = 400)
        : std::runtime_error(message), param(std::move(param)), code(code) {}
    std::string param;
    int code;
};

// A request body as a JSON object whose every field is one of `known`; BadRequest otherwise (an unknown field
// is named as `param`, in OpenAI's words).
nlohmann::json parse_body(const std::string &body, std::initializer_list<const char *> known);
// The same check of the fields of an object inside a body.
void refuse_unknown_fields(const nlohmann::json &object, std::initializer_list<const char *> known);

// body["seed"], which must be an integer in [0, 2^63): BadRequest otherwise (a negative seed included, never
// wrapped to a large one).
uint64_t parse_seed(const nlohmann::json &body);

struct GenerateRequest {
    std::string prompt;
    int max_tokens = 64;
    float temperature = 1.0f;
    int top_k = 0;  // 0 = off
    float top_p = 1.0f;
    std::optional<uint64_t> seed;  // none: the server draws one and reports it
    bool stream = false;
};

// Parses the JSON body. Unknown fields, wrong types and out-of-range values are
// BadRequest; `max_tokens_limit` caps max_tokens.
GenerateRequest parse_generate_request(const std::string &body, int max_tokens_limit);

}  // namespace server
