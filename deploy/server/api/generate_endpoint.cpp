// generate_endpoint.cpp — POST /v1/generate of HttpServer (http_server.h), the server's own API: one
// completion, whole or streamed as SSE `token` events ending in `done` or `error`.
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/generate.h"
#include "api/http_server.h"
#include "api/reply.h"

namespace server {

using nlohmann::json;

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

}  // namespace server
