// generate.cpp — see generate.h.
#include "api/generate.h"

#include <algorithm>
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

std::vector<std::shared_ptr<Job>> run_jobs(const ServedModel &model, std::vector<JobSpec> specs, const EventSink &sink,
                                           const std::function<bool()> &client_gone) {
    const auto signal = std::make_shared<JobSignal>();
    std::vector<std::shared_ptr<Job>> jobs;
    for (JobSpec &spec : specs) {
        if (!jobs.empty()) spec.shares_prompt_with = jobs.front();
        jobs.push_back(std::make_shared<Job>(std::move(spec), signal));
    }
    for (const auto &job : jobs) model.scheduler->submit(job);
    std::vector<bool> ended(jobs.size(), false);
    std::vector<TokenEvent> events;
    bool cancelled = false;
    const auto cancel_all = [&] {
        cancelled = true;
        for (const auto &job : jobs) job->cancel();
    };
    while (std::find(ended.begin(), ended.end(), false) != ended.end()) {
        const uint64_t seen = signal->count();
        bool news = false;
        for (size_t i = 0; i < jobs.size(); ++i) {
            if (ended[i]) continue;
            ended[i] = jobs[i]->take(&events, Clock::now());  // no wait: the signal waits for them all
            news = news || ended[i] || !events.empty();
            for (const TokenEvent &e : events)
                if (!cancelled && sink && !sink(i, e)) cancel_all();
            events.clear();
            // A failed completion fails the request: its siblings give their slots back now.
            if (ended[i] && jobs[i]->status() != GPT_OK && !cancelled) cancel_all();
        }
        if (!cancelled && client_gone && client_gone()) cancel_all();
        // Bounded waits: a client that left is noticed by the next write, and the scheduler checks
        // the cancellation between steps.
        if (!news) signal->wait_past(seen, Clock::now() + seconds(0.5));
    }
    return jobs;
}

}  // namespace server
