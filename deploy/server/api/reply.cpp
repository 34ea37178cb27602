// reply.cpp — see reply.h.
#include "api/reply.h"

namespace server {

using nlohmann::json;

std::string json_text(const json &j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply_error(http::Response &res, int status, const std::string &type, const std::string &message,
                 const std::string &param, const std::string &code) {
    const auto or_null = [](const std::string &s) { return s.empty() ? json(nullptr) : json(s); };
    res.status = status;
    res.set_content(
        json_text(json{
            {"error", {{"message", message}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}}),
        kJson);
}

void reply_bad_request(http::Response &res, const BadRequest &e) {
    reply_error(res, e.code, e.code == 404 ? "not_found_error" : "invalid_request_error", e.what(), e.param,
                e.code == 404 ? "model_not_found" : "");
}

std::string sse(const std::string &event, const json &data) {
    return (event.empty() ? "" : "event: " + event + "\n") + "data: " + json_text(data) + "\n\n";
}

}  // namespace server
