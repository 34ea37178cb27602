// options.h — the server's settings, from flags or a config file (--config).
#pragma once

#include <optional>
#include <string>

namespace server {

struct Options {
    std::string model;  // model directory (model_artifacts/<name>) or one artifact
    std::string host = "127.0.0.1";
    int port = 8080;  // 0 = any free port (logged)
    bool allow_cpu_fallback = false;
    std::optional<std::string> trusted_keys;  // Ed25519 public key file or directory; unset = GPT_TRUSTED_KEYS
    bool allow_unsigned = false;              // without trusted keys: load artifacts whose signature nothing checks
    int threads = 0;                          // intra-op CPU threads for the model, 0 = default
    bool no_cuda_graphs = false;              // decode steps as plain kernel launches on a GPU
    int parallel = 4;                         // requests decoded together (slots); <= the artifact's max_batch
    int prefill_budget = 0;                   // prompt tokens between two decode steps; 0: the device's default
    bool no_prefix_cache = false;             // prefill every prompt whole (no reuse of a cached prefix)
    int max_queue = 16;                       // generations waiting for a slot; beyond: 429
    double request_timeout = 60;              // seconds, queue wait included
    int max_tokens = 1024;                    // cap on a request's max_tokens
    size_t max_body_bytes = 64 * 1024;
    size_t max_header_bytes = 16 * 1024;  // request line + headers; beyond: 431
    size_t max_headers = 100;             // header lines; beyond: 431
    double header_timeout = 10;           // seconds from a request's first byte to its blank line; then 408
    double body_timeout = 30;             // seconds from the blank line to the body's last byte; then 408
    size_t max_connections = 0;           // per listener; 0 = a quarter of the open-file limit, at most 1024
    std::optional<int> health_port;       // unset = no health listener; 0 = any free port (logged)
    double shutdown_grace = 10;           // seconds for in-flight requests after SIGTERM
    bool admin = false;                   // POST /admin/reload: loopback clients with the token only
    std::string admin_token_file;         // the bearer token (mode 0600 or 0400); required by admin
    std::string models_root;              // reloads load directories under it only; required by admin
    std::string log_level = "info";
};

// Parses argv (and the file named by --config). Returns false after printing
// help or an error; `*exit_code` is then what main should return. An artifact is native code: without trusted
// keys (--trusted-keys or GPT_TRUSTED_KEYS) the server starts only with --allow-unsigned, and never with both.
bool parse_options(int argc, char **argv, Options *options, int *exit_code);

}  // namespace server
