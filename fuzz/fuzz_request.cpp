// fuzz_request.cpp — HTTP request bodies into the server's parsers (deploy/server/api/request.cpp,
// completion_request.cpp): /v1/generate, /v1/completions, /tokenize and /detokenize.
#include <cstdint>
#include <string>

#include "api/completion_request.h"
#include "api/request.h"
#include "fuzz_check.h"

namespace {

constexpr int kMaxTokens = 1024;  // the server's default cap

void generate_body(const std::string &body) {
    server::GenerateRequest r;
    try {
        r = server::parse_generate_request(body, kMaxTokens);
    } catch (const server::BadRequest &) {
        return;
    }
    // What the generation relies on once a request is accepted.
    FUZZ_CHECK(!r.prompt.empty());
    FUZZ_CHECK(r.max_tokens >= 1 && r.max_tokens <= kMaxTokens);
    FUZZ_CHECK(r.temperature >= 0.0f && r.temperature <= 100.0f);
    FUZZ_CHECK(r.top_k >= 0);
    FUZZ_CHECK(r.top_p > 0.0f && r.top_p <= 1.0f);
}

void completion_body(const std::string &body) {
    server::CompletionRequest r;
    try {
        r = server::parse_completion_request(body, kMaxTokens);
    } catch (const server::BadRequest &e) {
        FUZZ_CHECK(e.code >= 400 && e.code < 500);
        return;
    }
    FUZZ_CHECK(r.text ? !r.text->empty() : !r.prompt_tokens.empty());  // a text may hold NUL (its length is passed)
    for (const int32_t t : r.prompt_tokens) FUZZ_CHECK(t >= 0);
    FUZZ_CHECK(r.max_tokens >= 1 && r.max_tokens <= kMaxTokens);
    FUZZ_CHECK(r.temperature >= 0.0f && r.temperature <= 2.0f);
    FUZZ_CHECK(r.top_k >= 0);
    FUZZ_CHECK(r.top_p > 0.0f && r.top_p <= 1.0f);
    FUZZ_CHECK(r.stop.size() <= 4);
    for (const std::string &s : r.stop) FUZZ_CHECK(!s.empty() && s.size() <= 255);
    FUZZ_CHECK(r.logprobs >= -1 && r.logprobs <= 5);
    FUZZ_CHECK(!(r.echo && r.logprobs >= 0));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string body(data, data + size);
    generate_body(body);
    completion_body(body);
    try {
        server::parse_tokenize_request(body);
    } catch (const server::BadRequest &) {
    }
    try {
        for (const int32_t t : server::parse_detokenize_request(body)) FUZZ_CHECK(t >= 0);
    } catch (const server::BadRequest &) {
    }
    return 0;
}
