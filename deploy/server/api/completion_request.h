// completion_request.h — the body of POST /v1/completions (OpenAI's legacy
// completions API) and its checks. Needs no runtime: the request fuzzer builds
// this file alone. Fields OpenAI has and this server does not support are refused
// by name unless they hold their neutral value, so a client never gets silently
// different behaviour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/request.h"

namespace server {

struct CompletionRequest {
    std::string model;                   // "" (absent): the served model
    std::optional<std::string> text;     // the prompt as text ...
    std::vector<int32_t> prompt_tokens;  // ... or as token ids (when `text` is empty)
    int max_tokens = 16;                 // OpenAI's default
    float temperature = 1.0f;
    float top_p = 1.0f;
    int top_k = 0;                  // extension: 0 = off; negative values are refused
    std::optional<uint64_t> seed;   // [0, 2^63); none: drawn by the server and named in the reply
    std::vector<std::string> stop;  // up to 4
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    int logprobs = -1;           // -1: null; 0..5
    bool echo = false;
    bool ignore_eos = false;         // extension (as vLLM and llama.cpp): EOS is a token like any other
    bool tokens_as_ids = false;      // extension (vLLM's return_tokens_as_token_ids): logprobs name tokens "token_id:N"
    int n = 1;                       // completions of the prompt, 1..kMaxChoices
    float presence_penalty = 0.0f;   // [-2, 2]
    float frequency_penalty = 0.0f;  // [-2, 2]
    std::vector<std::pair<int32_t, float>> logit_bias;  // distinct token ids (checked against the vocabulary later)
};

// The most completions one request may ask for (`n`), and the most tokens its logit_bias may name.
constexpr int kMaxChoices = 16;
constexpr size_t kMaxLogitBias = 1024;

// Parses the JSON body; BadRequest (with the field as `param`) for anything to fix.
// `max_tokens_limit` caps max_tokens.
CompletionRequest parse_completion_request(const std::string &body, int max_tokens_limit);

// POST /tokenize {"prompt": text} and POST /detokenize {"tokens": [ids]}.
std::string parse_tokenize_request(const std::string &body);
std::vector<int32_t> parse_detokenize_request(const std::string &body);

}  // namespace server
