// generate.h — the one path of every generation endpoint: a prompt's tokens in,
// through the served model's scheduler, each token handed to the endpoint's
// writer on the request's own thread as it is generated.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/request.h"
#include "gpt_runtime.h"
#include "scheduling/model_slot.h"
#include "scheduling/scheduler.h"

namespace server {

// The prompt as token ids for `model`; BadRequest for text the tokenizer refuses or an empty result.
std::vector<gpt_token> tokenize_prompt(const ServedModel &model, const std::string &prompt);
// BadRequest for an id outside the vocabulary or a prompt longer than the model's context.
void check_prompt(const ServedModel &model, const std::vector<gpt_token> &prompt);
// Token ids -> their text (bytes that are not UTF-8 become U+FFFD when the reply is written).
std::string detokenize(const ServedModel &model, const std::vector<gpt_token> &tokens);
// A request's sampling settings; without a seed, one is drawn, so that unseeded requests differ and each
// reply can say the seed it used.
gpt_sampler_params sampling_params(float temperature, int top_k, float top_p, std::optional<uint64_t> seed);

// Called per event of specs[index]; returning false means the client is gone (the request is cancelled).
using EventSink = std::function<bool(size_t index, const TokenEvent &event)>;

// Runs `specs` (a request's completions: one, or `n` of one prompt) on the model's scheduler together until
// every one ends; returns the ended jobs in order. Each after the first shares the first's prompt
// (JobSpec::shares_prompt_with). Events reach `sink` as they come, on the calling thread. `client_gone`
// (optional) is asked between waits as well as the sink per event, so that a client that leaves while its
// request waits in the queue frees its places too; either cancels every job, as does a job that fails.
std::vector<std::shared_ptr<Job>> run_jobs(const ServedModel &model, std::vector<JobSpec> specs, const EventSink &sink,
                                           const std::function<bool()> &client_gone = nullptr);

}  // namespace server
