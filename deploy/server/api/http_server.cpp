// http_server.cpp — see http_server.h: construction, the route table, bind/start/stop, transport errors.
#include "api/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "api/reply.h"

namespace server {

namespace {

// I/O threads of the main port: reading requests costs them little (generations run on workers); two keep
// one quick route (a long /tokenize) from delaying every other connection.
constexpr size_t kIoThreads = 2;
// Probers are few: a flood on the health port meets its own small cap.
constexpr size_t kMaxProbeConnections = 64;

// The endpoint a request is counted under: its path if the server has one there, else "other", so that
// clients cannot add a metrics series per made-up URL.
std::string endpoint_label(const std::string &path) {
    for (const char *known : {"/healthz", "/readyz", "/metrics", "/v1/generate", "/v1/completions", "/v1/models",
                              "/tokenize", "/detokenize", "/admin/reload"})
        if (path == known) return path;
    return "other";
}

// A quarter of the open-file limit, at most 1024: connections cannot use up the descriptors that accept()
// and the model's files need.
size_t default_max_connections() {
    rlimit files{};
    if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return 1024;
    return std::clamp<size_t>(static_cast<size_t>(files.rlim_cur) / 4, 16, 1024);
}

std::chrono::milliseconds millis(double seconds) {
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

http::Limits request_limits(const Options &options) {
    http::Limits limits;
    limits.max_head_bytes = options.max_header_bytes;
    limits.max_header_lines = options.max_headers;
    limits.max_body_bytes = options.max_body_bytes;
    limits.head_timeout = millis(options.header_timeout);
    limits.body_timeout = millis(options.body_timeout);
    limits.max_connections = options.max_connections ? options.max_connections : default_max_connections();
    return limits;
}

HttpServer::HttpServer(const Options &options, ModelSlot &slot, Admission &admission, Metrics &metrics)
    : options_(options),
      slot_(slot),
      admission_(admission),
      metrics_(metrics),
      admin_(options.admin ? std::make_unique<AdminAccess>(options.admin_token_file, options.models_root) : nullptr) {
    const auto error = [this](http::Response &res, int status, const std::string &message, const std::string &path) {
        transport_error(res, status, message, path);
    };
    // Workers run the routes that wait: room for every slot, the queue, and a reload or two.
    main_ = std::make_unique<http::Listener>(request_limits(options), api_routes(), error, kIoThreads,
                                             static_cast<size_t>(options.parallel + options.max_queue) + 4);
    if (options.health_port) {
        http::Router probes;
        add_probe_routes(probes);
        http::Limits limits = request_limits(options);
        limits.max_connections = std::min<size_t>(limits.max_connections, kMaxProbeConnections);
        health_ = std::make_unique<http::Listener>(limits, std::move(probes), error, 1, 0);
    }
}

http::Router HttpServer::api_routes() {
    http::Router router;
    add_probe_routes(router);
    using http::RunsOn;
    const auto route = [this](void (HttpServer::*handler)(const http::Request &, http::Response &)) {
        return [this, handler](const http::Request &req, http::Response &res) { (this->*handler)(req, res); };
    };
    router.add("POST", "/v1/generate", RunsOn::worker, route(&HttpServer::generate));
    router.add("POST", "/v1/completions", RunsOn::worker, route(&HttpServer::completions));
    router.add("GET", "/v1/models", RunsOn::io_thread,
               [this](const http::Request &, http::Response &res) { models(res); });
    router.add("POST", "/tokenize", RunsOn::io_thread, route(&HttpServer::handle_tokenize));
    router.add("POST", "/detokenize", RunsOn::io_thread, route(&HttpServer::handle_detokenize));
    if (options_.admin) router.add("POST", "/admin/reload", RunsOn::worker, route(&HttpServer::admin_reload));
    return router;
}

void HttpServer::transport_error(http::Response &res, int status, const std::string &message, const std::string &path) {
    reply_error(res, status, status == 404 ? "not_found_error" : "invalid_request_error", message);
    metrics_.count_request(endpoint_label(path), status);
}

int HttpServer::bind() {
    const int port = main_->bind(options_.host, options_.port);
    if (port < 0) return -1;
    if (health_ && (health_port_ = health_->bind(options_.host, *options_.health_port)) < 0) return -1;
    return port;
}

void HttpServer::start() {
    if (health_) health_->start();
    main_->start();
}

void HttpServer::stop() {
    main_->stop();
    if (health_) health_->stop();
}

}  // namespace server
