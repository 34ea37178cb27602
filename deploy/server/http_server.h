// http_server.h — the HTTP surface: routes, status codes, SSE streaming,
// admission and metrics around each generation, and hot reload.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>

#include "admin_auth.h"
#include "admission.h"
#include "clock.h"
#include "guarded_server.h"
#include "metrics.h"
#include "model_slot.h"
#include "options.h"

namespace server {

// The limits on every request's head and body that options set (guarded_connection.h).
RequestLimits request_limits(const Options &options);

class HttpServer {
public:
    HttpServer(const Options &options, ModelSlot &slot, Admission &admission, Metrics &metrics);

    // Binds options.host:port (port 0 = any free one) and returns the port; -1 on failure.
    int bind();
    // Serves until stop(). Returns after in-flight connections are closed.
    void serve();
    void stop();
    // Loads `path` (empty = the configured model) beside the current model and
    // swaps it in; logged and counted. Used by POST /admin/reload and SIGHUP.
    LoadResult reload(const std::string &path);

    // GET /healthz, /readyz and /metrics on `server`: this server's, and the health listener's.
    void register_probes(httplib::Server &server);

private:
    void generate(const httplib::Request &req, httplib::Response &res);
    // OpenAI-compatible endpoints (completions.cpp).
    void completions(const httplib::Request &req, httplib::Response &res);
    void models(httplib::Response &res);
    void handle_tokenize(const httplib::Request &req, httplib::Response &res);
    void handle_detokenize(const httplib::Request &req, httplib::Response &res);
    // A generation request's id (also sent as X-Request-Id), and its count and log line once answered.
    std::string begin_request(const char *id_prefix, httplib::Response &res);
    void finish_request(const char *endpoint, const std::string &id, Clock::time_point started, int code);
    // Waits for a slot (admission) and takes the current model: 0, or the HTTP status already replied.
    int admit(Clock::time_point started, std::shared_ptr<Ticket> *ticket, std::shared_ptr<const ServedModel> *model,
              httplib::Response &res);
    void log_generation(const std::string &id, Clock::time_point started, const ServedModel &model, bool stream,
                        size_t prompt_tokens, const Job &job, double first_token);
    void admin_reload(const httplib::Request &req, httplib::Response &res);
    void serve_metrics(httplib::Response &res);

    const Options &options_;
    ModelSlot &slot_;
    Admission &admission_;
    Metrics &metrics_;
    std::unique_ptr<AdminAccess> admin_;  // set when admin is on
    GuardedServer http_;
    std::atomic<uint64_t> next_request_id_{1};
};

}  // namespace server
