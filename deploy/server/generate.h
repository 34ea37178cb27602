// generate.h — POST /v1/generate: the prompt's tokens and one generation over
// the C API, with per-token events for streaming.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "clock.h"
#include "gpt_runtime.h"
#include "model_slot.h"
#include "request.h"

namespace server {

// The prompt as token ids for `model`; BadRequest for characters outside the
// vocabulary or a prompt longer than the model's context.
std::vector<gpt_token> tokenize_prompt(const ServedModel &model, const std::string &prompt);

struct GenerationResult {
    gpt_status status = GPT_OK;      // GPT_OK or GPT_ERR_ABORTED for the finish reasons below
    std::string error;               // the runtime's message when status is another error
    std::string finish_reason;       // "stop" (EOS), "length", "cancelled" (client gone), "timeout", "shutdown"
    std::vector<gpt_token> tokens;   // generated, also when stopped early
    std::string text;                // their text
    double time_to_first_token = 0;  // seconds from `started`
};

// Called per token with its text; returning false means the client is gone.
using TokenSink = std::function<bool(gpt_token token, const std::string &piece)>;

struct GenerationControl {
    Clock::time_point started;
    Clock::time_point deadline;          // the request's timeout
    const std::atomic<bool> *stop_all;   // set when shutdown's grace period ends
    TokenSink sink;                      // may be empty (non-streaming)
    std::function<void(double)> on_gap;  // seconds between tokens, for the latency histogram
};

GenerationResult run_generation(const ServedModel &model, const std::vector<gpt_token> &prompt,
                                const GenerateRequest &request, const GenerationControl &control);

}  // namespace server
