// fuzz_request.cpp — HTTP request bodies into parse_generate_request (deploy/server/request.cpp).
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    constexpr int kMaxTokens = 1024;  // the server's default cap
    server::GenerateRequest r;
    try {
        r = server::parse_generate_request(std::string(data, data + size), kMaxTokens);
    } catch (const server::BadRequest &) {
        return 0;
    }
    // What the generation relies on once a request is accepted.
    FUZZ_CHECK(!r.prompt.empty());
    FUZZ_CHECK(r.max_tokens >= 1 && r.max_tokens <= kMaxTokens);
    FUZZ_CHECK(r.temperature >= 0.0f && r.temperature <= 100.0f);
    FUZZ_CHECK(r.top_k >= 0);
    FUZZ_CHECK(r.top_p > 0.0f && r.top_p <= 1.0f);
    return 0;
}
