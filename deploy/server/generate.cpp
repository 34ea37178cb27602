// generate.cpp — see generate.h.
#include "generate.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

namespace server {

namespace {

using nlohmann::json;

// body[key] as T within [lo, hi] (`range` says so in the message), or `fallback` when absent.
template <typename T>
T number_field(const json &body, const char *key, T fallback, double lo, double hi, const std::string &range) {
    if (!body.contains(key)) return fallback;
    const json &v = body.at(key);
    const bool ok = std::is_integral_v<T> ? v.is_number_integer() : v.is_number();
    if (!ok)
        throw BadRequest(std::string("'") + key + "' must be " + (std::is_integral_v<T> ? "an integer" : "a number"));
    const double d = v.get<double>();
    if (!(d >= lo && d <= hi)) throw BadRequest(std::string("'") + key + "' must be in " + range);
    return v.get<T>();
}

std::string piece_of(const gpt_model *model, gpt_token token) {
    char text[32];
    size_t size = 0;
    if (gpt_detokenize(model, &token, 1, text, sizeof text, &size) != GPT_OK) return "";
    return std::string(text, size - 1);
}

struct CallbackState {
    const ServedModel *model;
    const GenerationControl *control;
    GenerationResult *result;
    Clock::time_point last;
    bool client_gone = false;
    bool timed_out = false;
    bool shutting_down = false;
};

bool on_token(gpt_token token, void *user_data) {
    auto &st = *static_cast<CallbackState *>(user_data);
    const Clock::time_point now = Clock::now();
    GenerationResult &r = *st.result;
    if (r.tokens.empty()) {
        r.time_to_first_token = std::chrono::duration<double>(now - st.control->started).count();
    } else if (st.control->on_gap) {
        st.control->on_gap(std::chrono::duration<double>(now - st.last).count());
    }
    st.last = now;
    const std::string piece = piece_of(st.model->model, token);
    r.tokens.push_back(token);
    r.text += piece;
    if (st.control->sink && !st.control->sink(token, piece)) return !(st.client_gone = true);
    if (now >= st.control->deadline) return !(st.timed_out = true);
    if (st.control->stop_all->load()) return !(st.shutting_down = true);
    return true;
}

}  // namespace

GenerateRequest parse_generate_request(const std::string &body, int max_tokens_limit) {
    json j;
    try {
        j = json::parse(body);
    } catch (const json::parse_error &e) {
        throw BadRequest(std::string("body is not valid JSON: ") + e.what());
    }
    if (!j.is_object()) throw BadRequest("body must be a JSON object");
    for (const auto &item : j.items()) {
        static const char *known[] = {"prompt", "max_tokens", "temperature", "top_k", "top_p", "seed", "stream"};
        bool is_known = false;
        for (const char *k : known) is_known = is_known || item.key() == k;
        if (!is_known) throw BadRequest("unknown field '" + item.key() + "'");
    }
    GenerateRequest r;
    if (!j.contains("prompt")) throw BadRequest("missing field 'prompt'");
    if (!j["prompt"].is_string() || j["prompt"].get<std::string>().empty())
        throw BadRequest("'prompt' must be a non-empty string");
    r.prompt = j["prompt"].get<std::string>();
    r.max_tokens = number_field<int>(j, "max_tokens", r.max_tokens, 1, max_tokens_limit,
                                     "[1, " + std::to_string(max_tokens_limit) + "]");
    r.temperature = number_field<float>(j, "temperature", r.temperature, 0.0, 100.0, "[0, 100]");
    r.top_k = number_field<int>(j, "top_k", r.top_k, 0, std::numeric_limits<int>::max(), "[0, 2^31)");
    r.top_p = number_field<float>(j, "top_p", r.top_p, std::numeric_limits<float>::min(), 1.0, "(0, 1]");
    if (j.contains("seed")) {
        if (!j["seed"].is_number_unsigned()) throw BadRequest("'seed' must be a non-negative integer");
        r.seed = j["seed"].get<uint64_t>();
    }
    if (j.contains("stream")) {
        if (!j["stream"].is_boolean()) throw BadRequest("'stream' must be true or false");
        r.stream = j["stream"].get<bool>();
    }
    return r;
}

std::vector<gpt_token> tokenize_prompt(const ServedModel &model, const std::string &prompt) {
    int32_t n = 0;
    gpt_status s = gpt_tokenize(model.model, prompt.c_str(), nullptr, 0, &n);
    if (s != GPT_ERR_BUFFER_TOO_SMALL && s != GPT_OK) throw BadRequest(std::string("prompt: ") + gpt_last_error());
    if (n > model.info.block_size)
        throw BadRequest("prompt is " + std::to_string(n) + " tokens, the model's context is " +
                         std::to_string(model.info.block_size));
    std::vector<gpt_token> tokens(static_cast<size_t>(n));
    if (gpt_tokenize(model.model, prompt.c_str(), tokens.data(), n, &n) != GPT_OK)
        throw BadRequest(std::string("prompt: ") + gpt_last_error());
    return tokens;
}

GenerationResult run_generation(const ServedModel &model, const std::vector<gpt_token> &prompt,
                                const GenerateRequest &request, const GenerationControl &control) {
    GenerationResult result;
    CallbackState state{&model, &control, &result, control.started};
    gpt_session *session = nullptr;
    if ((result.status = gpt_session_create(model.model, &session)) != GPT_OK) {
        result.error = gpt_last_error();
        return result;
    }
    gpt_generate_params p = gpt_generate_default_params();
    p.max_new_tokens = request.max_tokens;
    p.temperature = request.temperature;
    p.top_k = request.top_k;
    p.top_p = request.top_p;
    p.seed = request.seed;
    p.on_token = on_token;
    p.user_data = &state;
    std::vector<gpt_token> out(static_cast<size_t>(request.max_tokens));
    int32_t count = 0;
    result.status = gpt_session_generate(session, prompt.data(), static_cast<int32_t>(prompt.size()), &p, out.data(),
                                         request.max_tokens, &count);
    if (result.status != GPT_OK) result.error = gpt_last_error();
    gpt_session_free(session);
    if (result.status == GPT_OK) {
        result.finish_reason = "length";
    } else if (result.status == GPT_ERR_ABORTED) {  // our callback stopped it: the reason says why
        result.finish_reason = state.client_gone ? "cancelled" : state.timed_out ? "timeout" : "shutdown";
        result.error.clear();
    }
    return result;
}

}  // namespace server
