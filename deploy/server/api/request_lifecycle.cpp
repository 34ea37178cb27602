// request_lifecycle.cpp — what every generation endpoint of HttpServer (http_server.h) does around its
// generation: the request's id, its admission (a slot or a queue place, and the model), the 503 of a job
// that never got a slot, and its count and log line once answered.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "api/http_server.h"
#include "api/reply.h"

namespace server {

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
