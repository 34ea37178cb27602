// request.cpp — see request.h.
#include "api/request.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <type_traits>

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
        throw BadRequest(std::string("'") + key + "' must be " + (std::is_integral_v<T> ? "an integer" : "a number"),
                         key);
    const double d = v.get<double>();
    if (!(d >= lo && d <= hi)) throw BadRequest(std::string("'") + key + "' must be in " + range, key);
    return v.get<T>();
}

}  // namespace

void refuse_unknown_fields(const json &object, std::initializer_list<const char *> known) {
    for (const auto &item : object.items()) {
        bool is_known = false;
        for (const char *k : known) is_known = is_known || item.key() == k;
        if (!is_known) throw BadRequest("Unrecognized request argument supplied: " + item.key(), item.key());
    }
}

json parse_body(const std::string &body, std::initializer_list<const char *> known) {
    json j;
    try {
        j = json::parse(body);
    } catch (const json::exception &e) {  // syntax errors, and numbers too large for a double
        throw BadRequest(std::string("body is not valid JSON: ") + e.what());
    }
    if (!j.is_object()) throw BadRequest("body must be a JSON object");
    refuse_unknown_fields(j, known);
    return j;
}

uint64_t parse_seed(const json &body) {
    const json &seed = body.at("seed");
    // One range whatever the client's integer type: JSON's -1 is not 2^64 - 1, and every seed echoed back
    // fits a signed 64-bit integer. No value means "random": leave the field out (or null, in the
    // completions API) and the reply names the seed drawn.
    if (!seed.is_number_integer() || (!seed.is_number_unsigned() && seed.get<int64_t>() < 0) ||
        (seed.is_number_unsigned() && seed.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
        throw BadRequest(
            "'seed' must be an integer in [0, 2^63 - 1]; leave it out for a random one, which the reply names", "seed");
    return seed.get<uint64_t>();
}

GenerateRequest parse_generate_request(const std::string &body, int max_tokens_limit) {
    json j = parse_body(body, {"prompt", "max_tokens", "temperature", "top_k", "top_p", "seed", "stream"});
    GenerateRequest r;
    if (!j.contains("prompt")) throw BadRequest("missing field 'prompt'", "prompt");
    if (!j["prompt"].is_string() || j["prompt"].get<std::string>().empty())
        throw BadRequest("'prompt' must be a non-empty string", "prompt");
    r.prompt = j["prompt"].get<std::string>();  // NUL included: tokenize_prompt passes its length
    r.max_tokens = number_field<int>(j, "max_tokens", r.max_tokens, 1, max_tokens_limit,
                                     "[1, " + std::to_string(max_tokens_limit) + "]");
    r.temperature = number_field<float>(j, "temperature", r.temperature, 0.0, 100.0, "[0, 100]");
    r.top_k = number_field<int>(j, "top_k", r.top_k, 0, std::numeric_limits<int>::max(), "[0, 2^31) (0 = off)");
    r.top_p = number_field<float>(j, "top_p", r.top_p, std::numeric_limits<float>::min(), 1.0, "(0, 1]");
    if (j.contains("seed")) r.seed = parse_seed(j);
    if (j.contains("stream")) {
        if (!j["stream"].is_boolean()) throw BadRequest("'stream' must be true or false", "stream");
        r.stream = j["stream"].get<bool>();
    }
    return r;
}

}  // namespace server
