// gpt-server — an example HTTP/JSON server over libgpt_runtime (see deploy/README.md).
//   POST /v1/completions  OpenAI's completions API (streaming, stop, logprobs, echo, seed; docs in deploy/README.md)
//   GET  /v1/models;  POST /tokenize /detokenize
//   POST /v1/generate   {"prompt", "max_tokens", "temperature", "top_k", "top_p", "seed", "stream"}
//   GET  /healthz /readyz /metrics (also on --health-port);  POST /admin/reload (--admin: loopback + token)
// Signals: SIGTERM/SIGINT drain and exit 0; SIGHUP reloads the configured model.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <memory>
#include <string>
#include <thread>

#include "api/http_server.h"
#include "clock.h"
#include "metrics.h"
#include "options.h"
#include "scheduling/admission.h"
#include "scheduling/model_slot.h"

namespace {

using server::Clock;
using server::seconds;

// The runtime's own log lines, through the server's logger.
void runtime_log(gpt_log_level level, const char *message, void *) {
    static const spdlog::level::level_enum levels[] = {spdlog::level::trace, spdlog::level::debug, spdlog::level::info,
                                                       spdlog::level::warn, spdlog::level::err};
    spdlog::log(levels[level], "event=runtime message=\"{}\"", message);
}

// Stop taking work, give in-flight requests the grace period, then end what is left. The listeners stay
// up meanwhile (/readyz says draining) and stop last.
void shut_down(server::HttpServer &http, server::Admission &admission, std::atomic<bool> &stop_generations,
               double grace) {
    admission.drain();
    const bool idle = admission.wait_idle(Clock::now() + seconds(grace));
    if (!idle) {
        spdlog::warn("event=shutdown_grace_over admitted={} (ending their generations)", admission.admitted());
        stop_generations = true;
        admission.wait_idle(Clock::now() + seconds(5));
    }
    http.stop();
}

int run(const server::Options &options) {
    spdlog::set_default_logger(spdlog::stderr_color_mt("gpt-server"));  // stdout stays free for tools
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l %v");
    spdlog::set_level(spdlog::level::from_str(options.log_level));
    gpt_log_set_callback(runtime_log, nullptr);
    if (options.allow_unsigned)
        spdlog::warn(
            "event=signatures_off message=\"--allow-unsigned: artifacts load without a signature check, their "
            "compiled code unverified\"");

    // Signals are taken by sigwait in this thread only: block them before any thread starts.
    sigset_t signals;
    sigemptyset(&signals);
    for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, s);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a write error, not a signal

    server::Metrics metrics;
    std::atomic<bool> stop_generations{false};  // set when shutdown's grace period ends
    server::SchedulerOptions scheduling{options.parallel, options.prefill_budget, &metrics, &stop_generations};
    scheduling.prefix_cache = !options.no_prefix_cache;
    server::ModelSlot slot(
        {options.threads, options.allow_cpu_fallback, !options.no_cuda_graphs, options.trusted_keys, scheduling});
    // A generation holds an admission ticket while it runs in a slot or waits in the scheduler's queue.
    server::Admission admission(options.parallel, options.max_queue);
    server::HttpServer http(options, slot, admission, metrics);
    if (const auto r = http.reload(options.model); r.status != GPT_OK) return 1;

    const int port = http.bind();
    if (port < 0) return 1;  // logged by the listener
    spdlog::info("event=listening host={} port={} admin={} health_port={}", options.host, port, options.admin,
                 http.health_port() >= 0 ? std::to_string(http.health_port()) : "off");
    http.start();

    while (true) {
        int signal = 0;
        sigwait(&signals, &signal);
        if (signal == SIGHUP) {
            http.reload("");
            continue;
        }
        spdlog::info("event=shutdown signal={} admitted={} grace_s={}", signal, admission.admitted(),
                     options.shutdown_grace);
        shut_down(http, admission, stop_generations, options.shutdown_grace);
        break;
    }
    spdlog::info("event=stopped");
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    server::Options options;
    int exit_code = 0;
    if (!server::parse_options(argc, argv, &options, &exit_code)) return exit_code;
    try {
        return run(options);
    } catch (const std::exception &e) {
        spdlog::critical("event=fatal error=\"{}\"", e.what());
        return 1;
    }
}
