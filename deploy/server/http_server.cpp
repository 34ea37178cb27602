// http_server.cpp — see http_server.h.
#include "http_server.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <memory>

#include "body_limit.h"
#include "generate.h"
#include "readiness.h"
#include "reply.h"

namespace server {

namespace {

using nlohmann::json;

// The endpoint a request is counted under: its path if the server has one there, else "other", so that
// clients cannot add a metrics series per made-up URL.
std::string endpoint_label(const std::string &path) {
    for (const char *known : {"/healthz", "/readyz", "/metrics", "/v1/generate", "/v1/completions", "/v1/models",
                              "/tokenize", "/detokenize", "/admin/reload"})
        if (path == known) return path;
    return "other";
}

}  // namespace

RequestLimits request_limits(const Options &options) {
    RequestLimits limits;
    limits.max_head_bytes = options.max_header_bytes;
    limits.max_header_lines = options.max_headers;
    limits.head_timeout = std::chrono::milliseconds(static_cast<int64_t>(options.header_timeout * 1000));
    // Room for any sane chunk framing around a body at the cap (1-byte chunks take 6 bytes each).
    const uint64_t body = options.max_body_bytes;
    limits.max_body_wire_bytes = body > (UINT64_MAX - 65536) / 8 ? UINT64_MAX : 8 * body + 65536;
    return limits;
}

HttpServer::HttpServer(const Options &options, ModelSlot &slot, Admission &admission, Metrics &metrics)
    : options_(options),
      slot_(slot),
      admission_(admission),
      metrics_(metrics),
      admin_(options.admin ? std::make_unique<AdminAccess>(options.admin_token_file, options.models_root) : nullptr),
      // Queued requests wait on a thread: room for every slot, the queue, and probes.
      http_(request_limits(options),
            static_cast<size_t>(options.parallel) + static_cast<size_t>(options.max_queue) + 4) {
    http_.set_payload_max_length(options.max_body_bytes);
    http_.set_read_timeout(30);
    http_.set_write_timeout(30);

    register_probes(http_);
    // Every POST route reads its body through the cap, whatever the transfer encoding (body_limit.h).
    const auto post = [this](const char *path,
                             void (HttpServer::*handler)(const httplib::Request &, httplib::Response &)) {
        post_with_body_limit(
            http_, path, options_.max_body_bytes,
            [this, handler](const httplib::Request &req, httplib::Response &res) { (this->*handler)(req, res); });
    };
    post("/v1/generate", &HttpServer::generate);
    post("/v1/completions", &HttpServer::completions);
    http_.Get("/v1/models", [this](const httplib::Request &, httplib::Response &res) { models(res); });
    post("/tokenize", &HttpServer::handle_tokenize);
    post("/detokenize", &HttpServer::handle_detokenize);
    if (options.admin) post("/admin/reload", &HttpServer::admin_reload);
    // Errors httplib raises itself (413 body too large, 404, ...) get a JSON body too.
    http_.set_error_handler([this](const httplib::Request &req, httplib::Response &res) {
        if (res.body.empty()) {  // raised by httplib, not by a handler (which counts its own)
            const std::string message =
                res.status == 413   ? "request body exceeds " + std::to_string(options_.max_body_bytes) + " bytes"
                : res.status == 431 ? "request head exceeds " + std::to_string(options_.max_header_bytes) +
                                          " bytes or " + std::to_string(options_.max_headers) + " header lines"
                : res.status == 408
                    ? fmt::format("request line and headers took longer than {:g} s", options_.header_timeout)
                : res.status == 415
                    ? std::string("request bodies are plain JSON: no Content-Encoding, no multipart/form-data")
                : res.status == 404 ? "no such endpoint: " + req.method + " " + req.path
                                    : "HTTP error " + std::to_string(res.status);
            reply_error(res, res.status, "http", message);
            metrics_.count_request(endpoint_label(req.path), res.status);
        }
    });
}

void HttpServer::register_probes(httplib::Server &server) {
    server.Get("/healthz", [this](const httplib::Request &, httplib::Response &res) {
        res.status = 200;
        res.set_content("ok\n", "text/plain");
        metrics_.count_request("/healthz", 200);
    });
    server.Get("/readyz", [this](const httplib::Request &, httplib::Response &res) {
        const auto model = slot_.current();
        const Readiness r = readiness(model ? model->info.name : nullptr, model && model->scheduler->device_failed(),
                                      admission_.draining());
        res.status = r.status;
        res.set_content(r.text, "text/plain");
        metrics_.count_request("/readyz", res.status);
    });
    server.Get("/metrics", [this](const httplib::Request &, httplib::Response &res) { serve_metrics(res); });
}

int HttpServer::bind() {
    if (options_.port == 0) return http_.bind_to_any_port(options_.host);
    return http_.bind_to_port(options_.host, options_.port) ? options_.port : -1;
}

void HttpServer::serve() { http_.listen_after_bind(); }

void HttpServer::stop() { http_.stop(); }

void HttpServer::serve_metrics(httplib::Response &res) {
    Gauges g;
    g.active = admission_.active();
    g.queued = admission_.queued();
    g.slots = options_.parallel;
    if (const auto model = slot_.current()) {
        g.slots_in_use = model->scheduler->slots_in_use();
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

void HttpServer::admin_reload(const httplib::Request &req, httplib::Response &res) {
    auto count = [&] { metrics_.count_request("/admin/reload", res.status); };
    if (const AdminVerdict denied = admin_->authorize(req); denied.status != 0) {
        if (!denied.www_authenticate.empty()) res.set_header("WWW-Authenticate", denied.www_authenticate);
        spdlog::warn("event=admin_denied code={} remote={} message=\"{}\"", denied.status, req.remote_addr,
                     denied.message);
        reply_error(res, denied.status, denied.status == 401 ? "unauthorized" : "forbidden", denied.message);
        return count();
    }
    std::string path;
    if (!req.body.empty()) {
        const json body = json::parse(req.body, nullptr, false);
        if (body.is_discarded() || !body.is_object() || (body.contains("path") && !body["path"].is_string())) {
            reply_error(res, 400, "invalid_request", "body must be {} or {\"path\": \"<model or artifact dir>\"}");
            return count();
        }
        path = body.value("path", "");
    }
    if (!path.empty()) {  // empty: the configured model, which the operator named
        const AdminVerdict refused = admin_->resolve_model_path(path, &path);
        if (refused.status != 0) {
            reply_error(res, refused.status, refused.status == 403 ? "forbidden" : "invalid_request", refused.message);
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

void HttpServer::generate(const httplib::Request &req, httplib::Response &res) {
    const Clock::time_point started = Clock::now();
    const std::string id = begin_request("req-", res);
    auto finish = [&](int code) { finish_request("/v1/generate", id, started, code); };

    GenerateRequest request;
    try {
        request = parse_generate_request(req.body, options_.max_tokens);
    } catch (const BadRequest &e) {
        reply_error(res, 400, "invalid_request", e.what());
        return finish(400);
    }
    std::shared_ptr<Ticket> ticket;
    std::shared_ptr<const ServedModel> model;
    if (const int code = admit(started, &ticket, &model, res); code != 0) return finish(code);
    std::vector<gpt_token> prompt;
    try {
        prompt = tokenize_prompt(*model, request.prompt);
        check_prompt(*model, prompt);
    } catch (const BadRequest &e) {
        reply_error(res, 400, "invalid_request", e.what());
        return finish(400);
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
    auto run = [this, id, started, model, spec, stream = request.stream](const EventSink &sink) {
        Outcome out;
        double first_token = 0;
        out.job = run_job(*model, spec, [&](const TokenEvent &e) {
            if (e.token != GPT_TOKEN_NONE && out.tokens.empty()) first_token = seconds_since(started);
            if (e.token != GPT_TOKEN_NONE) out.tokens.push_back(e.token);
            out.text += e.text;
            return !sink || sink(e);
        });
        log_generation(id, started, *model, stream, spec.prompt.size(), *out.job, first_token);
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
        if (out.job->status() == GPT_OK) {
            json body = summary(out);
            body["text"] = out.text;
            body["tokens"] = out.tokens;
            res.status = 200;
            res.set_content(json_text(body), kJson);
            return finish(200);
        }
        reply_error(res, out.job->status() == GPT_ERR_OUT_OF_MEMORY ? 503 : 500,
                    gpt_status_to_string(out.job->status()), out.job->error());
        return finish(res.status);
    }

    res.status = 200;
    finish(200);  // the status line goes out before the first token
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [ticket, run, summary](size_t, httplib::DataSink &sink) {
        const EventSink token_sink = [&sink](const TokenEvent &e) {
            if (e.token == GPT_TOKEN_NONE && e.text.empty()) return true;
            const std::string event = sse("token", {{"token", e.token}, {"text", e.text}});
            return sink.write(event.data(), event.size());
        };
        const Outcome out = run(token_sink);
        std::string last;
        if (out.job->status() == GPT_OK) {
            last = sse("done", summary(out));
        } else {
            last = sse("error",
                       {{"error", {{"type", gpt_status_to_string(out.job->status())}, {"message", out.job->error()}}}});
        }
        if (out.job->finish_reason() != "cancelled") sink.write(last.data(), last.size());
        sink.done();
        return true;
    });
}

std::string HttpServer::begin_request(const char *id_prefix, httplib::Response &res) {
    std::string id = id_prefix + std::to_string(next_request_id_++);
    res.set_header("X-Request-Id", id);
    return id;
}

void HttpServer::finish_request(const char *endpoint, const std::string &id, Clock::time_point started, int code) {
    metrics_.count_request(endpoint, code);
    if (code != 200)  // a 200 is logged when its generation ends (log_generation)
        spdlog::info("event=request id={} code={} duration_ms={:.1f}", id, code, 1e3 * seconds_since(started));
}

int HttpServer::admit(Clock::time_point started, std::shared_ptr<Ticket> *ticket,
                      std::shared_ptr<const ServedModel> *model, httplib::Response &res) {
    const Clock::time_point deadline = started + seconds(options_.request_timeout);
    switch (admission_.enter(deadline)) {
        case Admission::Verdict::admitted: break;
        case Admission::Verdict::queue_full:
            res.set_header("Retry-After", "1");
            reply_error(res, 429, "overloaded", "all generation slots are busy and the queue is full; retry later");
            return 429;
        case Admission::Verdict::draining:
            reply_error(res, 503, "shutting_down", "the server is shutting down");
            return 503;
        case Admission::Verdict::timed_out:
            reply_error(res, 503, "timeout", "no generation slot freed up within the request timeout");
            return 503;
    }
    *ticket = std::make_shared<Ticket>(admission_);
    *model = slot_.current();
    if (!*model) {
        reply_error(res, 503, "not_ready", "no model is loaded");
        return 503;
    }
    return 0;
}

void HttpServer::log_generation(const std::string &id, Clock::time_point started, const ServedModel &model, bool stream,
                                size_t prompt_tokens, const Job &job, double first_token) {
    if (job.completion_tokens() > 0) metrics_.observe_time_to_first_token(first_token);
    metrics_.observe_request_duration(seconds_since(started));
    spdlog::info(
        "event=request id={} code=200 stream={} model={} prompt_tokens={} completion_tokens={} finish={} "
        "queue_ms={:.2f} ttft_ms={:.2f} duration_ms={:.1f}{}",
        id, stream, model.info.name, prompt_tokens, job.completion_tokens(), job.finish_reason(),
        1e3 * job.queue_wait(), 1e3 * first_token, 1e3 * seconds_since(started),
        job.error().empty() ? "" : " error=\"" + job.error() + "\"");
}

}  // namespace server
