// completion_request.cpp — see completion_request.h.
#include "api/completion_request.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

namespace server {

namespace {

using nlohmann::json;

// j[key] when present and not null.
const json *field(const json &j, const char *key) {
    const auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
}

double number(const json &j, const char *key, double fallback, double lo, double hi, bool lo_open = false) {
    const json *v = field(j, key);
    if (!v) return fallback;
    if (!v->is_number()) throw BadRequest(std::string("'") + key + "' must be a number", key);
    const double d = v->get<double>();
    const bool above = lo_open ? d > lo : d >= lo;
    if (!(above && d <= hi))
        throw BadRequest(std::string("'") + key + "' must be in " + (lo_open ? "(" : "[") + std::to_string(lo) + ", " +
                             std::to_string(hi) + "], not " + v->dump(),
                         key);
    return d;
}

int64_t integer(const json &j, const char *key, int64_t fallback, int64_t lo, int64_t hi) {
    const json *v = field(j, key);
    if (!v) return fallback;
    if (!v->is_number_integer()) throw BadRequest(std::string("'") + key + "' must be an integer", key);
    const auto i = v->get<int64_t>();
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
        throw BadRequest(std::string("'") + key + "' must be at most " + std::to_string(hi), key);
    }
    if (i < lo || i > hi)
        throw BadRequest(std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                             "], not " + std::to_string(i),
                         key);
    return i;
}

bool boolean(const json &j, const char *key) {
    const json *v = field(j, key);
    if (!v) return false;
    if (!v->is_boolean()) throw BadRequest(std::string("'") + key + "' must be true or false", key);
    return v->get<bool>();
}

// A field OpenAI has that only its neutral value may take here.
void neutral_only(const json &j, const char *key, bool (*neutral)(const json &), const char *why) {
    const json *v = field(j, key);
    if (v && !neutral(*v)) throw BadRequest(std::string("'") + key + "' is not supported: " + why, key);
}

std::vector<int32_t> token_ids(const json &array, const char *key) {
    std::vector<int32_t> ids;
    for (const json &t : array) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
            throw BadRequest(std::string("'") + key + "' token ids must be non-negative integers", key);
        ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return ids;
}

// OpenAI's logit_bias: {"token id": bias in [-100, 100]}, the ids written in decimal without leading zeros, so
// that no two keys name one token.
std::vector<std::pair<int32_t, float>> logit_bias(const json &j) {
    const json *v = field(j, "logit_bias");
    if (!v) return {};
    if (!v->is_object()) throw BadRequest("'logit_bias' must be an object of token ids to numbers", "logit_bias");
    if (v->size() > kMaxLogitBias)  // each is added at every step of the request
        throw BadRequest("'logit_bias' holds at most " + std::to_string(kMaxLogitBias) + " tokens", "logit_bias");
    std::vector<std::pair<int32_t, float>> bias;
    for (const auto &[key, value] : v->items()) {
        const bool decimal = !key.empty() && key.size() <= 9 && (key == "0" || key[0] != '0') &&
                             key.find_first_not_of("0123456789") == std::string::npos;
        if (!decimal) throw BadRequest("'logit_bias' keys are token ids in decimal, not \"" + key + "\"", "logit_bias");
        if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0))
            throw BadRequest("'logit_bias' values are numbers in [-100, 100], not " + value.dump(), "logit_bias");
        bias.emplace_back(std::stoi(key), value.get<float>());
    }
    return bias;
}

}  // namespace

CompletionRequest parse_completion_request(const std::string &body, int max_tokens_limit) {
    const json j = parse_body(body, {"model",
                                     "prompt",
                                     "max_tokens",
                                     "temperature",
                                     "top_p",
                                     "top_k",
                                     "seed",
                                     "stop",
                                     "stream",
                                     "stream_options",
                                     "logprobs",
                                     "echo",
                                     "n",
                                     "best_of",
                                     "presence_penalty",
                                     "frequency_penalty",
                                     "logit_bias",
                                     "suffix",
                                     "user",
                                     "ignore_eos",
                                     "return_tokens_as_token_ids"});
    CompletionRequest r;
    if (const json *m = field(j, "model")) {
        if (!m->is_string()) throw BadRequest("'model' must be a string", "model");
        r.model = m->get<std::string>();
    }

    // prompt: a string, an array of token ids, or an array holding one of those (one prompt per request).
    const json *p = field(j, "prompt");
    if (!p) throw BadRequest("missing field 'prompt'", "prompt");
    const json *one = p;
    if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) one = &(*p)[0];
    if (one->is_string()) {
        r.text = one->get<std::string>();  // NUL included: tokenize_prompt passes its length
        if (r.text->empty()) throw BadRequest("'prompt' must not be empty", "prompt");
    } else if (one->is_array() && !one->empty() && (*one)[0].is_number()) {
        r.prompt_tokens = token_ids(*one, "prompt");
    } else if (p->is_array() && p->size() > 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
        throw BadRequest("one prompt per request: send the prompts as separate requests", "prompt");
    } else {
        throw BadRequest("'prompt' must be a non-empty string or array of token ids", "prompt");
    }

    r.max_tokens = static_cast<int>(integer(j, "max_tokens", r.max_tokens, 1, max_tokens_limit));
    r.temperature = static_cast<float>(number(j, "temperature", r.temperature, 0.0, 2.0));
    r.top_p = static_cast<float>(number(j, "top_p", r.top_p, 0.0, 1.0, /*lo_open=*/true));
    r.top_k = static_cast<int>(integer(j, "top_k", r.top_k, 0, std::numeric_limits<int32_t>::max()));
    if (field(j, "seed")) r.seed = parse_seed(j);
    if (const json *s = field(j, "stop")) {
        if (s->is_string()) {
            r.stop.push_back(s->get<std::string>());
        } else if (s->is_array() && s->size() <= 4) {
            for (const json &item : *s) {
                if (!item.is_string()) throw BadRequest("'stop' must hold strings", "stop");
                r.stop.push_back(item.get<std::string>());
            }
        } else {
            throw BadRequest("'stop' must be a string or an array of up to 4 strings", "stop");
        }
        for (const std::string &stop : r.stop)
            if (stop.empty() || stop.size() > 255 || stop.find('\0') != std::string::npos)
                throw BadRequest("each stop string holds 1 to 255 bytes and no NUL", "stop");
    }
    r.stream = boolean(j, "stream");
    if (const json *o = field(j, "stream_options")) {
        if (!o->is_object()) throw BadRequest("'stream_options' must be an object", "stream_options");
        refuse_unknown_fields(*o, {"include_usage"});
        r.include_usage = boolean(*o, "include_usage");
        if (!r.stream) throw BadRequest("'stream_options' needs 'stream': true", "stream_options");
    }
    r.logprobs = static_cast<int>(integer(j, "logprobs", -1, 0, 5));
    r.echo = boolean(j, "echo");
    if (r.echo && r.logprobs >= 0)
        throw BadRequest("'echo' with 'logprobs' is not supported: the prompt's log-probabilities are not computed",
                         "logprobs");
    r.ignore_eos = boolean(j, "ignore_eos");
    r.tokens_as_ids = boolean(j, "return_tokens_as_token_ids");
    r.n = static_cast<int>(integer(j, "n", 1, 1, kMaxChoices));
    if (const json *b = field(j, "best_of"); b && !(b->is_number_integer() && b->get<int64_t>() == r.n))
        throw BadRequest("'best_of' is not supported: each completion is returned (best_of = n)", "best_of");
    r.presence_penalty = static_cast<float>(number(j, "presence_penalty", 0.0, -2.0, 2.0));
    r.frequency_penalty = static_cast<float>(number(j, "frequency_penalty", 0.0, -2.0, 2.0));
    r.logit_bias = logit_bias(j);
    neutral_only(
        j, "suffix", [](const json &v) { return v.is_string() && v.get<std::string>().empty(); }, "no suffix");
    if (const json *u = field(j, "user"); u && !u->is_string()) throw BadRequest("'user' must be a string", "user");
    return r;
}

std::string parse_tokenize_request(const std::string &body) {
    const json j = parse_body(body, {"model", "prompt"});
    const json *p = field(j, "prompt");
    if (!p || !p->is_string()) throw BadRequest("'prompt' must be a string", "prompt");
    return p->get<std::string>();
}

std::vector<int32_t> parse_detokenize_request(const std::string &body) {
    const json j = parse_body(body, {"model", "tokens"});
    const json *t = field(j, "tokens");
    if (!t || !t->is_array()) throw BadRequest("'tokens' must be an array of token ids", "tokens");
    return token_ids(*t, "tokens");
}

}  // namespace server
