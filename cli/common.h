// common.h — pieces the gpt subcommands share: error reporting, a model owner,
// and streaming generation. Everything goes through the public C API.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpt_runtime.h"

namespace cli {

// Prints the status and the runtime's message to stderr; returns the exit code 1.
int report(gpt_status status);

// Owns a loaded model for the duration of a command. `path` is an artifact or a model directory; with
// allow_cpu_fallback, gpt_artifact_select may choose the CPU artifact on a GPU host without one for its arch.
// Without GPT_TRUSTED_KEYS a load warns on stderr that no signature was checked.
struct LoadedModel {
    gpt_model *model = nullptr;
    gpt_status status = GPT_OK;
    LoadedModel(const std::string &path, int threads, bool allow_cpu_fallback);
    ~LoadedModel();
    LoadedModel(const LoadedModel &) = delete;
    LoadedModel &operator=(const LoadedModel &) = delete;
};

struct SampleOptions {
    std::string prompt = "\n";
    std::vector<gpt_token> prompt_ids;  // when given, used instead of `prompt`
    int n = 200;
    uint64_t seed = 0;
    float temperature = 0.8f;
    int top_k = 0;
    float top_p = 1.0f;
    bool ignore_eos = false;  // keep generating past the tokenizer's EOS
};

// What gpt_session_generate would refuse in `o` (its own message), or "" when it accepts them: checked before
// a model is loaded, so a mistyped option costs no load.
std::string sample_options_problem(const SampleOptions &o);

// Tokenizes the prompt (or takes its ids), generates, and streams prompt + text
// to stdout: text through a gpt_detokenizer, ids as <id> for a model without a tokenizer.
gpt_status stream_sample(gpt_model *model, const SampleOptions &o);

}  // namespace cli
