// completions.cpp — POST /v1/completions of HttpServer (http_server.h), OpenAI's completions API: text or
// token-id prompts, `n` completions of one prompt, streaming as SSE `data:` chunks ending in `data: [DONE]`,
// stop strings, log-probabilities (logprobs_json.h), echo, seed, logit bias and penalties.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#include "api/completion_request.h"
#include "api/generate.h"
#include "api/http_server.h"
#include "api/logprobs_json.h"
#include "api/reply.h"

namespace server {

namespace {

using nlohmann::json;

int64_t unix_time() { return static_cast<int64_t>(std::time(nullptr)); }

// The first of a request's jobs that the runtime failed, or null.
const Job *failed_job(const std::vector<std::shared_ptr<Job>> &jobs) {
    const auto it =
        std::find_if(jobs.begin(), jobs.end(), [](const std::shared_ptr<Job> &job) { return job->status() != GPT_OK; });
    return it == jobs.end() ? nullptr : it->get();
}

}  // namespace

void HttpServer::completions(const http::Request &req, http::Response &res) {
    const Clock::time_point started = Clock::now();
    const std::string id = begin_request("cmpl-", res);
    auto finish = [&](int code) { finish_request("/v1/completions", id, started, code); };

    CompletionRequest request;
    std::shared_ptr<Ticket> ticket;
    std::shared_ptr<const ServedModel> model;
    JobSpec spec;
    std::string prompt_text;  // for echo
    try {
        request = parse_completion_request(req.body, options_.max_tokens);
        // The model is checked before waiting for a slot: a wrong name is the client's to fix now.
        const auto current = slot_.current();
        if (current && !request.model.empty() && request.model != current->info.name)
            throw BadRequest("The model '" + request.model + "' does not exist; this server serves '" +
                                 std::string(current->info.name) + "'",
                             "model", 404);
        if (request.n > admission_.capacity())
            throw BadRequest("'n' must be at most " + std::to_string(admission_.capacity()) +
                                 " here: each completion takes a slot or a place in the queue",
                             "n");
        if (const int code = admit(&ticket, &model, res, request.n); code != 0) return finish(code);
        if (request.text) {
            spec.prompt = tokenize_prompt(*model, *request.text);
            prompt_text = *request.text;
        } else {
            spec.prompt = request.prompt_tokens;
            check_prompt(*model, spec.prompt);
            if (request.echo) prompt_text = detokenize(*model, spec.prompt);
        }
        check_prompt(*model, spec.prompt);
        if (!request.stop.empty() && std::string(model->info.tokenizer) == "none")
            throw BadRequest("'stop' needs a text tokenizer; this model has none", "stop");
        for (const auto &[token, bias] : request.logit_bias) {
            if (token >= model->info.vocab_size)
                throw BadRequest("'logit_bias' names token " + std::to_string(token) + ", outside the vocabulary [0, " +
                                     std::to_string(model->info.vocab_size) + ")",
                                 "logit_bias");
            spec.logit_bias.push_back({token, bias});
        }
    } catch (const BadRequest &e) {
        reply_bad_request(res, e);
        return finish(e.code);
    }
    spec.max_tokens = request.max_tokens;
    spec.sampling = sampling_params(request.temperature, request.top_k, request.top_p, request.seed);
    spec.sampling.presence_penalty = request.presence_penalty;
    spec.sampling.frequency_penalty = request.frequency_penalty;
    spec.stop = request.stop;
    spec.stop_at_eos = !request.ignore_eos;
    spec.logprobs = request.logprobs;
    spec.arrived = started;
    spec.deadline = started + seconds(options_.request_timeout);
    // Completion i draws with seed + i (mod 2^63): the same as n requests seeded seed, seed + 1, ...
    std::vector<JobSpec> specs(static_cast<size_t>(request.n), spec);
    for (size_t i = 0; i < specs.size(); ++i) specs[i].sampling.seed = (spec.sampling.seed + i) & (~uint64_t{0} >> 1);

    const json head = {{"id", id},
                       {"object", "text_completion"},
                       {"created", unix_time()},
                       {"model", model->info.name},
                       {"seed", spec.sampling.seed}};
    const size_t prompt_tokens = spec.prompt.size();
    auto usage = [prompt_tokens](const std::vector<std::shared_ptr<Job>> &jobs) {
        size_t completion = 0;
        for (const auto &job : jobs) completion += static_cast<size_t>(job->completion_tokens());
        // OpenAI's cached_tokens: the prompt's prefix whose cache a slot held (scheduler.h), not computed again;
        // the prompt is counted once for the request, as its first completion computed it.
        return json{{"prompt_tokens", prompt_tokens},
                    {"completion_tokens", completion},
                    {"total_tokens", prompt_tokens + completion},
                    {"prompt_tokens_details", {{"cached_tokens", jobs.front()->cached_tokens()}}}};
    };
    auto choice = [](size_t index, const std::string &text, const json &logprobs, const json &finish_reason) {
        return json{{"text", text}, {"index", index}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
    };

    if (!request.stream) {
        std::vector<std::string> texts(specs.size(), request.echo ? prompt_text : "");
        std::vector<Logprobs> logprobs(specs.size(), Logprobs(*model, request.tokens_as_ids));
        double first_token = 0;
        const auto jobs = run_jobs(
            *model, specs,
            [&](size_t i, const TokenEvent &e) {
                if (e.token != GPT_TOKEN_NONE && first_token == 0) first_token = seconds_since(started);
                if (!e.logprobs.empty()) logprobs[i].add(e, texts[i] + e.text, texts[i].size());
                texts[i] += e.text;
                return true;
            },
            [&req] { return req.client_hung_up(); });
        log_generation(id, started, *model, false, prompt_tokens, jobs, first_token);
        if (reply_if_never_started(jobs, res)) return finish(res.status);
        if (const Job *failed = failed_job(jobs)) {
            reply_error(res, failed->status() == GPT_ERR_OUT_OF_MEMORY ? 503 : 500, "server_error", failed->error(), "",
                        gpt_status_to_string(failed->status()));
            return finish(res.status);
        }
        json body = head;
        body["choices"] = json::array();
        for (size_t i = 0; i < jobs.size(); ++i)
            body["choices"].push_back(choice(i, texts[i], request.logprobs >= 0 ? logprobs[i].to_json() : json(nullptr),
                                             jobs[i]->finish_reason()));
        body["usage"] = usage(jobs);
        res.status = 200;
        res.set_content(json_text(body), kJson);
        return finish(200);
    }

    res.status = 200;
    finish(200);  // the status line goes out before the first token
    res.set_header("Cache-Control", "no-cache");
    res.content_type = "text/event-stream";
    res.stream = [this, ticket, model, id, started, specs, request, prompt_text, head, usage, choice,
                  hung_up = req.hung_up](http::StreamWriter &sink) {
        auto send = [&sink](const json &data) {
            const std::string event = sse("", data);
            return sink.write(event);
        };
        auto chunk = [&head, &choice](size_t index, const std::string &text, const json &logprobs,
                                      const json &finish_reason) {
            json c = head;
            c["choices"] = json::array({choice(index, text, logprobs, finish_reason)});
            return c;
        };
        bool client_gone = false;
        for (size_t i = 0; i < specs.size() && request.echo && !client_gone; ++i)
            client_gone = !send(chunk(i, prompt_text, nullptr, nullptr));
        // For the log-probabilities' text offsets.
        std::vector<std::string> texts(specs.size(), request.echo ? prompt_text : "");
        Logprobs logprobs(*model, request.tokens_as_ids);
        double first_token = 0;
        const auto jobs = run_jobs(
            *model, specs,
            [&](size_t i, const TokenEvent &e) {
                if (client_gone) return false;
                if (e.token != GPT_TOKEN_NONE && first_token == 0) first_token = seconds_since(started);
                json lp = nullptr;
                if (!e.logprobs.empty()) {
                    logprobs.clear();
                    logprobs.add(e, texts[i] + e.text, texts[i].size());
                    lp = logprobs.to_json();
                }
                texts[i] += e.text;
                if (e.token == GPT_TOKEN_NONE && e.text.empty()) return true;
                client_gone = !send(chunk(i, e.text, lp, nullptr));
                return !client_gone;
            },
            [&hung_up] { return hung_up && hung_up->load(); });
        log_generation(id, started, *model, true, specs.front().prompt.size(), jobs, first_token);
        // A failure is reported (its siblings were cancelled because of it); a client that left hears nothing.
        const Job *failed = failed_job(jobs);
        if (!failed &&
            std::any_of(jobs.begin(), jobs.end(), [](const auto &job) { return job->finish_reason() == "cancelled"; }))
            return;
        if (failed) {
            send({{"error",
                   {{"message", failed->error()},
                    {"type", "server_error"},
                    {"param", nullptr},
                    {"code", gpt_status_to_string(failed->status())}}}});
        } else {
            for (size_t i = 0; i < jobs.size(); ++i) send(chunk(i, "", nullptr, jobs[i]->finish_reason()));
            if (request.include_usage) {
                json last = head;
                last["choices"] = json::array();
                last["usage"] = usage(jobs);
                send(last);
            }
        }
        sink.write("data: [DONE]\n\n");
    };
}

}  // namespace server
