// admin.cpp — HttpServer's hot reload (http_server.h): HttpServer::reload, used by SIGHUP and
// POST /admin/reload, and that route's checks (admin_auth.h).
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "api/http_server.h"
#include "api/reply.h"

namespace server {

using nlohmann::json;

LoadResult HttpServer::reload(const std::string &path) {
    const std::string target = path.empty() ? options_.model : path;
    spdlog::info("event=reload_start path={}", target);
    LoadResult r = slot_.load(target);
    metrics_.count_reload(r.status == GPT_OK);
    if (r.status == GPT_OK) {
        spdlog::info("event=reload_done path={} result=ok message=\"{}\"", target, r.message);
    } else {
        spdlog::error("event=reload_done path={} result=refused status={} message=\"{}\" (previous model kept)", target,
                      gpt_status_to_string(r.status), r.message);
    }
    return r;
}

void HttpServer::admin_reload(const http::Request &req, http::Response &res) {
    auto count = [&] { metrics_.count_request("/admin/reload", res.status); };
    if (const AdminVerdict denied = admin_->authorize(req); denied.status != 0) {
        if (!denied.www_authenticate.empty()) res.set_header("WWW-Authenticate", denied.www_authenticate);
        spdlog::warn("event=admin_denied code={} remote={} message=\"{}\"", denied.status, req.remote_addr,
                     denied.message);
        reply_error(res, denied.status, denied.status == 401 ? "authentication_error" : "permission_error",
                    denied.message);
        return count();
    }
    std::string path;
    if (!req.body.empty()) {
        const json body = json::parse(req.body, nullptr, false);
        if (body.is_discarded() || !body.is_object() || (body.contains("path") && !body["path"].is_string())) {
            reply_error(res, 400, "invalid_request_error", "body must be {} or {\"path\": \"<model or artifact dir>\"}",
                        "path");
            return count();
        }
        path = body.value("path", "");
    }
    if (!path.empty()) {  // empty: the configured model, which the operator named
        const AdminVerdict refused = admin_->resolve_model_path(path, &path);
        if (refused.status != 0) {
            reply_error(res, refused.status, refused.status == 403 ? "permission_error" : "invalid_request_error",
                        refused.message, "path");
            return count();
        }
    }
    const LoadResult r = reload(path);
    if (r.status == GPT_OK) {
        const auto model = slot_.current();
        res.status = 200;
        res.set_content(
            json_text(
                json{{"status", "ok"}, {"message", r.message}, {"model", model->info.name}, {"artifact", model->dir}}),
            kJson);
    } else {
        reply_error(res, r.status == GPT_ERR_BUSY ? 409 : 422, gpt_status_to_string(r.status),
                    r.message + " (the previous model keeps serving)");
    }
    count();
}

}  // namespace server
