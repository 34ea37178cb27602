// reply.h — how every reply body is written: JSON that never throws on a
// client's bytes, errors in OpenAI's shape, server-sent events.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "api/request.h"
#include "clock.h"
#include "transport/http_message.h"

namespace server {

constexpr const char *kJson = "application/json";

// Strings a client sent (echoed in an error, generated text) need not be UTF-8:
// bytes that are not become U+FFFD instead of an exception halfway through a reply.
std::string json_text(const nlohmann::json &j);

// {"error": {"message", "type", "param", "code"}} with HTTP status `status`, as OpenAI's API writes errors
// (its clients raise their typed exceptions from the status). `param` and `code` are null when empty.
void reply_error(http::Response &res, int status, const std::string &type, const std::string &message,
                 const std::string &param = "", const std::string &code = "");

// A BadRequest as OpenAI answers it: type invalid_request_error (not_found_error and code model_not_found for
// a 404), the field at fault as `param`.
void reply_bad_request(http::Response &res, const BadRequest &e);

// An SSE event: named (`event: NAME`) when `event` is not empty, then `data: JSON`.
std::string sse(const std::string &event, const nlohmann::json &data);

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace server
