// http_server.cpp — see http_server.h.
#include "api/http_server.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "api/generate.h"
#include "api/readiness.h"
#include "api/reply.h"

namespace server {

namespace {

using nlohmann::json;

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

void HttpServer::add_probe_routes(http::Router &router) {
    using http::RunsOn;
    router.add("GET", "/healthz", RunsOn::io_thread, [this](const http::Request &, http::Response &res) {
        res.status = 200;
        res.set_content("ok\n", "text/plain");
        metrics_.count_request("/healthz", 200);
    });
    router.add("GET", "/readyz", RunsOn::io_thread,
               [this](const http::Request &, http::Response &res) { readyz(res); });
    router.add("GET", "/metrics", RunsOn::io_thread,
               [this](const http::Request &, http::Response &res) { serve_metrics(res); });
}

void HttpServer::transport_error(http::Response &res, int status, const std::string &message, const std::string &path) {
    reply_error(res, status, status == 404 ? "not_found_error" : "invalid_request_error", message);
    metrics_.count_request(endpoint_label(path), status);
}

void HttpServer::readyz(http::Response &res) {
    const auto model = slot_.current();
    // Saturated: a generation sent now would wait for a worker or be refused (429), so a load balancer
    // should send it elsewhere.
    const bool saturated = main_->saturated() || admission_.full();
    const Readiness r = readiness(model ? model->info.name : nullptr, model && model->scheduler->device_failed(),
                                  admission_.draining(), saturated);
    res.status = r.status;
    res.set_content(r.text, "text/plain");
    metrics_.count_request("/readyz", res.status);
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

void HttpServer::serve_metrics(http::Response &res) {
    Gauges g;
    g.slots = options_.parallel;
    if (const auto model = slot_.current()) {
        g.slots_in_use = model->scheduler->slots_in_use();
        g.active = g.slots_in_use;
        g.queued = model->scheduler->waiting();
        g.model_name = model->info.name;
        if (gpt_model_get_memory(model->model, &g.memory, sizeof g.memory) != GPT_OK) g.memory = {};
    }
    g.resident_bytes = resident_memory_bytes();
    res.status = 200;
    res.set_content(metrics_.render(g), "text/plain; version=0.0.4");
    metrics_.count_request("/metrics", 200);
}

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

void HttpServer::generate(const http::Request &req, http::Response &res) {
    const Clock::time_point started = Clock::now();
    const std::string id = begin_request("req-", res);
    auto finish = [&](int code) { finish_request("/v1/generate", id, started, code); };

    GenerateRequest request;
    try {
        request = parse_generate_request(req.body, options_.max_tokens);
    } catch (const BadRequest &e) {
        reply_bad_request(res, e);
        return finish(e.code);
    }
    std::shared_ptr<Ticket> ticket;
    std::shared_ptr<const ServedModel> model;
    if (const int code = admit(&ticket, &model, res); code != 0) return finish(code);
    std::vector<gpt_token> prompt;
    try {
        prompt = tokenize_prompt(*model, request.prompt);
        check_prompt(*model, prompt);
    } catch (const BadRequest &e) {
        reply_bad_request(res, e);
        return finish(e.code);
    }
    JobSpec spec;
    spec.prompt = prompt;
    spec.max_tokens = request.max_tokens;
    spec.sampling = sampling_params(request.temperature, request.top_k, request.top_p, request.seed);
    spec.arrived = started;
    spec.deadline = started + seconds(options_.request_timeout);

    // Runs the generation, logs and counts it; `sink` streams tokens when set.
    struct Outcome {
        std::shared_ptr<Job> job;
        std::vector<gpt_token> tokens;
        std::string text;
    };
    auto run = [this, id, started, model, spec, stream = request.stream,
                hung_up = req.hung_up](const std::function<bool(const TokenEvent &)> &sink) {
        Outcome out;
        double first_token = 0;
        const auto jobs = run_jobs(
            *model, {spec},
            [&](size_t, const TokenEvent &e) {
                if (e.token != GPT_TOKEN_NONE && out.tokens.empty()) first_token = seconds_since(started);
                if (e.token != GPT_TOKEN_NONE) out.tokens.push_back(e.token);
                out.text += e.text;
                return !sink || sink(e);
            },
            [&hung_up] { return hung_up && hung_up->load(); });
        out.job = jobs.front();
        log_generation(id, started, *model, stream, spec.prompt.size(), jobs, first_token);
        return out;
    };
    auto summary = [model, id, spec](const Outcome &out) {
        return json{{"id", id},
                    {"model", model->info.name},
                    {"seed", spec.sampling.seed},
                    {"prompt_tokens", spec.prompt.size()},
                    {"completion_tokens", out.tokens.size()},
                    {"finish_reason", out.job->finish_reason()}};
    };

    if (!request.stream) {
        const Outcome out = run(nullptr);
        if (reply_if_never_started({out.job}, res)) return finish(res.status);
        if (out.job->status() == GPT_OK) {
            json body = summary(out);
            body["text"] = out.text;
            body["tokens"] = out.tokens;
            res.status = 200;
            res.set_content(json_text(body), kJson);
            return finish(200);
        }
        reply_error(res, out.job->status() == GPT_ERR_OUT_OF_MEMORY ? 503 : 500, "server_error", out.job->error(), "",
                    gpt_status_to_string(out.job->status()));
        return finish(res.status);
    }

    res.status = 200;
    finish(200);  // the status line goes out before the first token
    res.set_header("Cache-Control", "no-cache");
    res.content_type = "text/event-stream";
    res.stream = [ticket, run, summary](http::StreamWriter &sink) {
        const auto token_sink = [&sink](const TokenEvent &e) {
            if (e.token == GPT_TOKEN_NONE && e.text.empty()) return true;
            const std::string event = sse("token", {{"token", e.token}, {"text", e.text}});
            return sink.write(event);
        };
        const Outcome out = run(token_sink);
        std::string last;
        if (out.job->status() == GPT_OK) {
            last = sse("done", summary(out));
        } else {
            last = sse("error", {{"error",
                                  {{"message", out.job->error()},
                                   {"type", "server_error"},
                                   {"param", nullptr},
                                   {"code", gpt_status_to_string(out.job->status())}}}});
        }
        if (out.job->finish_reason() != "cancelled") sink.write(last);
    };
}

std::string HttpServer::begin_request(const char *id_prefix, http::Response &res) {
    std::string id = id_prefix + std::to_string(next_request_id_++);
    res.set_header("X-Request-Id", id);
    return id;
}

void HttpServer::finish_request(const char *endpoint, const std::string &id, Clock::time_point started, int code) {
    metrics_.count_request(endpoint, code);
    if (code != 200)  // a 200 is logged when its generation ends (log_generation)
        spdlog::info("event=request id={} code={} duration_ms={:.1f}", id, code, 1e3 * seconds_since(started));
}

int HttpServer::admit(std::shared_ptr<Ticket> *ticket, std::shared_ptr<const ServedModel> *model, http::Response &res,
                      int places) {
    switch (admission_.enter(places)) {
        case Admission::Verdict::admitted: break;
        case Admission::Verdict::queue_full:
            res.set_header("Retry-After", "1");
            reply_error(res, 429, "overloaded", "all generation slots are busy and the queue is full; retry later");
            return 429;
        case Admission::Verdict::draining:
            reply_error(res, 503, "shutting_down", "the server is shutting down");
            return 503;
    }
    *ticket = std::make_shared<Ticket>(admission_, places);
    *model = slot_.current();
    if (!*model) {
        reply_error(res, 503, "not_ready", "no model is loaded");
        return 503;
    }
    return 0;
}

bool HttpServer::reply_if_never_started(const std::vector<std::shared_ptr<Job>> &jobs, http::Response &res) {
    const bool never = std::any_of(jobs.begin(), jobs.end(), [](const auto &job) {
        return !job->got_slot() && job->finish_reason() == "timeout";
    });
    if (!never) return false;
    reply_error(res, 503, "server_error", "no generation slot freed up within the request timeout", "", "timeout");
    return true;
}

void HttpServer::log_generation(const std::string &id, Clock::time_point started, const ServedModel &model, bool stream,
                                size_t prompt_tokens, const std::vector<std::shared_ptr<Job>> &jobs,
                                double first_token) {
    int completion_tokens = 0;
    double queue_wait = 0;
    std::string finish, errors;
    for (const auto &job : jobs) {
        completion_tokens += job->completion_tokens();
        queue_wait = std::max(queue_wait, job->queue_wait());
        finish += (finish.empty() ? "" : ",") + job->finish_reason();
        if (!job->error().empty()) errors += (errors.empty() ? "" : "; ") + job->error();
    }
    if (completion_tokens > 0) metrics_.observe_time_to_first_token(first_token);
    metrics_.observe_request_duration(seconds_since(started));
    spdlog::info(
        "event=request id={} code=200 stream={} model={} n={} prompt_tokens={} completion_tokens={} finish={} "
        "queue_ms={:.2f} ttft_ms={:.2f} duration_ms={:.1f}{}",
        id, stream, model.info.name, jobs.size(), prompt_tokens, completion_tokens, finish, 1e3 * queue_wait,
        1e3 * first_token, 1e3 * seconds_since(started), errors.empty() ? "" : " error=\"" + errors + "\"");
}

}  // namespace server
