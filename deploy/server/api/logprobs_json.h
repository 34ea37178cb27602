// logprobs_json.h — the log-probabilities of a completion as POST /v1/completions writes them.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpt_runtime.h"
#include "scheduling/job.h"
#include "scheduling/model_slot.h"

namespace server {

// The log-probabilities of a completion, in the completions API's column layout.
class Logprobs {
public:
    Logprobs(const ServedModel &model, bool as_ids) : model_(&model), as_ids_(as_ids) {}

    // One token's entry; its text starts at byte `offset` of `text` (the reply's text so far).
    void add(const TokenEvent &e, const std::string &text, size_t offset);
    nlohmann::json to_json() const;
    void clear() { *this = Logprobs(*model_, as_ids_); }

private:
    // A token's own bytes (part of a character for some BPE tokens: those become U+FFFD in the reply),
    // or its id as vLLM's return_tokens_as_token_ids writes it.
    std::string token_text(gpt_token t) const;

    const ServedModel *model_;
    bool as_ids_;
    std::vector<std::string> tokens_;
    std::vector<float> token_logprobs_;
    std::vector<nlohmann::json> top_logprobs_;
    std::vector<size_t> text_offset_;
};

}  // namespace server
