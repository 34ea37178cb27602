// http_server.h — the HTTP API: routes, status codes, SSE streaming, admission and
// metrics around each generation, and hot reload. The transport under it
// (transport/) reads requests within their limits and writes what the routes answer.
// The class's methods, one file per job: http_server.cpp (construction, routes, bind/start/stop),
// probes.cpp, admin.cpp, generate_endpoint.cpp, completions.cpp, token_endpoints.cpp, and
// request_lifecycle.cpp (what every generation endpoint does around its generation).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "api/admin_auth.h"
#include "clock.h"
#include "metrics.h"
#include "options.h"
#include "scheduling/admission.h"
#include "scheduling/model_slot.h"
#include "transport/listener.h"

namespace server {

// The limits on every request's head, body and connection that options set.
http::Limits request_limits(const Options &options);

class HttpServer {
public:
    HttpServer(const Options &options, ModelSlot &slot, Admission &admission, Metrics &metrics);

    // Binds options.host:port (port 0 = any free one) and the health port when options name one; returns
    // the main port, -1 on failure. health_port() is the other's, -1 when there is none.
    int bind();
    int health_port() const { return health_port_; }
    // Serves on the transport's threads until stop().
    void start();
    void stop();
    // Loads `path` (empty = the configured model) beside the current model and
    // swaps it in; logged and counted. Used by POST /admin/reload and SIGHUP.
    LoadResult reload(const std::string &path);

private:
    http::Router api_routes();
    // GET /healthz, /readyz and /metrics: the main port's and the health port's (probes.cpp).
    void add_probe_routes(http::Router &router);
    void readyz(http::Response &res);
    void serve_metrics(http::Response &res);
    // The body of an answer the transport makes itself (404, 408, 413, 415, 431, ...), counted.
    void transport_error(http::Response &res, int status, const std::string &message, const std::string &path);

    // POST /v1/generate, the server's own API (generate_endpoint.cpp), and POST /v1/completions, OpenAI's
    // (completions.cpp); GET /v1/models, POST /tokenize and /detokenize (token_endpoints.cpp).
    void generate(const http::Request &req, http::Response &res);
    void completions(const http::Request &req, http::Response &res);
    void models(http::Response &res);
    void handle_tokenize(const http::Request &req, http::Response &res);
    void handle_detokenize(const http::Request &req, http::Response &res);
    // POST /admin/reload (admin.cpp, with reload()).
    void admin_reload(const http::Request &req, http::Response &res);

    // Around every generation (request_lifecycle.cpp):
    // a generation request's id (also sent as X-Request-Id), and its count and log line once answered.
    std::string begin_request(const char *id_prefix, http::Response &res);
    void finish_request(const char *endpoint, const std::string &id, Clock::time_point started, int code);
    // Takes `places` among the generations (a slot or the scheduler's queue each, admission.h) and the current
    // model: 0, or the HTTP status already replied (429 full, 503 draining or no model).
    int admit(std::shared_ptr<Ticket> *ticket, std::shared_ptr<const ServedModel> *model, http::Response &res,
              int places = 1);
    // A plain reply for a generation one of whose jobs ended in the queue at its deadline, never given a slot: 503.
    bool reply_if_never_started(const std::vector<std::shared_ptr<Job>> &jobs, http::Response &res);
    // One log line for a request's jobs (their tokens summed), its duration and its time to first token
    // (`first_token`: seconds from arrival to the first token of any of them, 0 for none) observed once.
    void log_generation(const std::string &id, Clock::time_point started, const ServedModel &model, bool stream,
                        size_t prompt_tokens, const std::vector<std::shared_ptr<Job>> &jobs, double first_token);

    const Options &options_;
    ModelSlot &slot_;
    Admission &admission_;
    Metrics &metrics_;
    std::unique_ptr<AdminAccess> admin_;  // set when admin is on
    std::unique_ptr<http::Listener> main_;
    std::unique_ptr<http::Listener> health_;  // set when options name a health port
    int health_port_ = -1;
    std::atomic<uint64_t> next_request_id_{1};
};

}  // namespace server
