// options.cpp — see options.h.
#include "options.h"

#include <CLI/CLI.hpp>

#include <cstdlib>

namespace server {

bool parse_options(int argc, char **argv, Options *o, int *exit_code) {
    CLI::App app{"gpt-server: HTTP/JSON generation over libgpt_runtime"};
    app.set_config("--config", "", "TOML file with the options below (flags override it)");
    app.add_option("--model", o->model, "model directory (model_artifacts/<name>) or one artifact")->required();
    app.add_option("--host", o->host, "address to listen on (default loopback)");
    app.add_option("--port", o->port, "port, 0 = any free one")->check(CLI::Range(0, 65535));
    app.add_flag("--allow-cpu-fallback", o->allow_cpu_fallback, "serve the CPU artifact when none fits the GPU");
    app.add_option("--trusted-keys", o->trusted_keys,
                   "public key file or directory of *.pub: serve only artifacts signed by one of them "
                   "(default: GPT_TRUSTED_KEYS)");
    app.add_flag("--allow-unsigned", o->allow_unsigned,
                 "without trusted keys, serve artifacts whose signature nothing checks (their compiled code runs "
                 "unverified); the server does not start without keys unless given this");
    app.add_option("--threads", o->threads, "intra-op CPU threads, 0 = default")->check(CLI::NonNegativeNumber);
    app.add_flag("--no-cuda-graphs", o->no_cuda_graphs,
                 "on a GPU, launch each decode step's kernels one by one instead of replaying captured CUDA graphs");
    app.add_option("--parallel", o->parallel,
                   "requests decoded together in one batch (slots); at most the artifact's max_batch")
        ->check(CLI::PositiveNumber);
    app.add_option("--prefill-budget", o->prefill_budget,
                   "prompt tokens prefilled between two decode steps while a stream waits for its next token (a "
                   "longer prompt is prefilled in pieces, one a round); 0 = the device's default: on a CPU 8 with the "
                   "artifact's mixed graph, else 16; 512 on a GPU")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("--no-prefix-cache", o->no_prefix_cache,
                 "prefill every prompt whole, instead of reusing the cache of a prefix another request left");
    app.add_option("--max-queue", o->max_queue, "generations waiting for a slot (then 429)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--request-timeout", o->request_timeout, "seconds per request, queueing included")
        ->check(CLI::PositiveNumber);
    app.add_option("--max-tokens", o->max_tokens, "largest max_tokens a request may ask")->check(CLI::PositiveNumber);
    app.add_option("--max-body-bytes", o->max_body_bytes, "largest request body (then 413)")
        ->check(CLI::PositiveNumber);
    app.add_option("--max-header-bytes", o->max_header_bytes, "largest request line + headers (then 431)")
        ->check(CLI::Range(size_t{1024}, size_t{1} << 20));
    app.add_option("--max-headers", o->max_headers, "most header lines in a request (then 431)")
        ->check(CLI::Range(size_t{8}, size_t{10000}));
    app.add_option("--header-timeout", o->header_timeout,
                   "seconds a request's line and headers may take to arrive (then 408)")
        ->check(CLI::Range(0.01, 3600.0));
    app.add_option("--body-timeout", o->body_timeout,
                   "seconds a request's body may take to arrive after its headers (then 408)")
        ->check(CLI::Range(0.01, 3600.0));
    app.add_option("--max-connections", o->max_connections,
                   "open connections per listener; more are closed at once (0 = a quarter of the open-file limit, "
                   "at most 1024)")
        ->check(CLI::Range(size_t{0}, size_t{1} << 20));
    app.add_option("--health-port", o->health_port,
                   "second listener for /healthz, /readyz and /metrics with its own thread (0 = any free port)")
        ->check(CLI::Range(0, 65535));
    app.add_option("--shutdown-grace", o->shutdown_grace, "seconds in-flight requests get after SIGTERM")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("--admin", o->admin,
                 "enable POST /admin/reload for loopback clients holding the token (needs --admin-token-file "
                 "and --models-root)");
    app.add_option("--admin-token-file", o->admin_token_file,
                   "file holding the admin bearer token, mode 0600 or 0400 (the server refuses others)");
    app.add_option("--models-root", o->models_root, "directory that every admin reload path must resolve into");
    app.add_option("--log-level", o->log_level, "trace, debug, info, warn, error, off")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
    try {
        app.parse(argc, argv);
        // Loopback alone is not authentication, and a reload path must have bounds: no admin without both.
        if (o->admin && (o->admin_token_file.empty() || o->models_root.empty()))
            throw CLI::ValidationError("--admin", "needs --admin-token-file and --models-root");
        // An artifact is a shared library the server runs: only a signature says who built it.
        const bool keys = o->trusted_keys.has_value() || std::getenv("GPT_TRUSTED_KEYS") != nullptr;
        if (!keys && !o->allow_unsigned)
            throw CLI::ValidationError(
                "--trusted-keys",
                "no trusted keys, so no artifact's signature can be checked and its compiled code would run "
                "unverified: give --trusted-keys (a .pub file or a directory of them; or GPT_TRUSTED_KEYS) to serve "
                "signed artifacts only, or start with --allow-unsigned to serve unsigned ones");
        if (keys && o->allow_unsigned)
            throw CLI::ValidationError("--allow-unsigned",
                                       "contradicts the trusted keys (--trusted-keys or GPT_TRUSTED_KEYS), with "
                                       "which only artifacts signed by one of them load: give one or the other");
    } catch (const CLI::ParseError &e) {
        *exit_code = app.exit(e);
        return false;
    }
    return true;
}

}  // namespace server
