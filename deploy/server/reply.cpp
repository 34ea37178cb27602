// reply.cpp — see reply.h.
#include "reply.h"

namespace server {

using nlohmann::json;

std::string json_text(const json &j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply_error(httplib::Response &res, int status, const std::string &type, const std::string &message,
                 const std::string &param, const std::string &code) {
    const auto or_null = [](const std::string &s) { return s.empty() ? json(nullptr) : json(s); };
    res.status = status;
    res.set_content(
        json_text(json{
            {"error", {{"message", message}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}}),
        kJson);
}

std::string sse(const std::string &event, const json &data) {
    return (event.empty() ? "" : "event: " + event + "\n") + "data: " + json_text(data) + "\n\n";
}

}  // namespace server
