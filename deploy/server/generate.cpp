// generate.cpp — see generate.h.
#include "generate.h"

#include <random>

namespace server {

std::vector<gpt_token> tokenize_prompt(const ServedModel &model, const std::string &prompt) {
    // With its length: a JSON "\u0000" is a character of the prompt, not its end.
    int32_t n = 0;
    gpt_status s = gpt_model_tokenize_n(model.model, prompt.data(), prompt.size(), 0, nullptr, 0, &n);
    if (s != GPT_ERR_BUFFER_TOO_SMALL && s != GPT_OK)
        throw BadRequest(std::string("prompt: ") + gpt_runtime_last_error(), "prompt");
    if (n == 0) throw BadRequest("prompt encodes to no tokens", "prompt");
    std::vector<gpt_token> tokens(static_cast<size_t>(n));
    if (gpt_model_tokenize_n(model.model, prompt.data(), prompt.size(), 0, tokens.data(), n, &n) != GPT_OK)
        throw BadRequest(std::string("prompt: ") + gpt_runtime_last_error(), "prompt");
    return tokens;
}

void check_prompt(const ServedModel &model, const std::vector<gpt_token> &prompt) {
    if (prompt.empty()) throw BadRequest("prompt encodes to no tokens", "prompt");
    if (prompt.size() > static_cast<size_t>(model.info.block_size))
        throw BadRequest("prompt is " + std::to_string(prompt.size()) + " tokens, the model's context is " +
                             std::to_string(model.info.block_size),
                         "prompt");
    for (const gpt_token t : prompt)
        if (t < 0 || t >= model.info.vocab_size)
            throw BadRequest("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                 std::to_string(model.info.vocab_size) + ")",
                             "prompt");
}

std::string detokenize(const ServedModel &model, const std::vector<gpt_token> &tokens) {
    size_t size = 0;
    const auto n = static_cast<int32_t>(tokens.size());
    gpt_status s = gpt_model_detokenize(model.model, tokens.data(), n, nullptr, 0, &size);
    if (s != GPT_ERR_BUFFER_TOO_SMALL) throw BadRequest(std::string("tokens: ") + gpt_runtime_last_error(), "tokens");
    std::string text(size, '\0');
    if (gpt_model_detokenize(model.model, tokens.data(), n, text.data(), size, &size) != GPT_OK)
        throw BadRequest(std::string("tokens: ") + gpt_runtime_last_error(), "tokens");
    text.resize(size - 1);
    return text;
}

gpt_sampler_params sampling_params(float temperature, int top_k, float top_p, std::optional<uint64_t> seed) {
    static thread_local std::mt19937_64 engine{std::random_device{}()};
    gpt_sampler_params p;
    gpt_sampler_default_params(&p, sizeof p);
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.seed = seed ? *seed : engine() >> 1;  // below 2^63: any client's integer type holds it
    return p;
}

std::shared_ptr<Job> run_job(const ServedModel &model, JobSpec spec, const EventSink &sink,
                             const std::function<bool()> &client_gone) {
    auto job = std::make_shared<Job>(std::move(spec));
    model.scheduler->submit(job);
    std::vector<TokenEvent> events;
    bool ended = false;
    while (!ended) {
        // Bounded waits: a client that left is noticed by the next write, and the scheduler checks
        // the cancellation between steps.
        ended = job->take(&events, Clock::now() + seconds(0.5));
        for (const TokenEvent &e : events)
            if (!job->cancelled() && sink && !sink(e)) job->cancel();
        if (!job->cancelled() && client_gone && client_gone()) job->cancel();
        events.clear();
    }
    return job;
}

}  // namespace server
