// test_server_readiness.cpp — gpt-server's /readyz answer (deploy/server/api/readiness.h),
// which both listeners serve. The device-failed input is the scheduler's flag, set
// when a prefill or decode step returns GPT_ERR_CUDA (Scheduler::fail_all). No CPU
// run can make the runtime return that status, so the flag itself is not raised
// here: these cases pin what /readyz answers once it is.
#include <catch2/catch.hpp>

#include "api/readiness.h"

using server::readiness;

TEST_CASE("readyz is 200 only with a model, a working device, no drain and room for a request") {
    CHECK(readiness("tiny", false, false, false).status == 200);
    CHECK(readiness("tiny", false, false, false).text == "ready: tiny\n");
    CHECK(readiness(nullptr, false, false, false).status == 503);
    CHECK(readiness("tiny", false, true, false).status == 503);
    CHECK(readiness("tiny", false, true, false).text == "draining\n");
    CHECK(readiness("tiny", false, false, true).status == 503);
    CHECK(readiness("tiny", false, false, true).text.rfind("saturated", 0) == 0);
}

TEST_CASE("readyz is 503 once the device failed, draining or not") {
    for (const bool draining : {false, true}) {
        const server::Readiness r = readiness("tiny", true, draining, false);
        CHECK(r.status == 503);
        CHECK(r.text == "the device failed (CUDA error): restart the server\n");
    }
}
