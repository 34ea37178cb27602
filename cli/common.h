// common.h — pieces the gpt subcommands share: error reporting, a model owner,
// and streaming generation. Everything goes through the public C API.
#pragma once

#include <cstdint>
#include <string>

#include "gpt_runtime.h"

namespace cli {

// Prints the status and the runtime's message to stderr; returns the exit code 1.
int report(gpt_status status);

// Owns a loaded model for the duration of a command.
struct LoadedModel {
    gpt_model *model = nullptr;
    gpt_status status = GPT_OK;
    LoadedModel(const std::string &dir, int threads);
    ~LoadedModel();
    LoadedModel(const LoadedModel &) = delete;
    LoadedModel &operator=(const LoadedModel &) = delete;
};

struct SampleOptions {
    std::string prompt = "\n";
    int n = 200;
    uint64_t seed = 0;
    float temperature = 0.8f;
    int top_k = 0;
    float top_p = 1.0f;
};

// Tokenizes the prompt, generates, and streams prompt + text to stdout.
gpt_status stream_sample(gpt_model *model, const SampleOptions &o);

}  // namespace cli
