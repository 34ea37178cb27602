// A GPU's failure as the runtime reports it (exec/device_health.h): a sticky CUDA error marks the
// model's device failed, and every later graph call on the model says so with GPT_ERR_CUDA, while
// what needs no GPU (the tokenizer) goes on. The sticky error itself needs a GPU to provoke; here
// it is recorded as a graph would record it, on a CPU model.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/error.h"
#include "exec/device_health.h"
#include "exec/model.h"
#include "test_support.h"

TEST_CASE("DeviceHealth keeps the first sticky failure and throws it as GPT_ERR_CUDA", "[device_health]") {
    gpt::DeviceHealth health;
    CHECK_NOTHROW(health.check());
    health.record_sticky("graph decode on cuda:1: cudaErrorIllegalAddress: an illegal memory access was encountered");
    health.record_sticky("graph prefill on cuda:1: cudaErrorLaunchFailure: unspecified launch failure");
    try {
        health.check();
        FAIL("a failed device passed the check");
    } catch (const gpt::Error &e) {
        const std::string what = e.what();
        CHECK(e.status() == GPT_ERR_CUDA);
        CHECK(what.find("graph decode on cuda:1: cudaErrorIllegalAddress") != std::string::npos);
        CHECK(what.find("cudaErrorLaunchFailure") == std::string::npos);  // the first one is the cause
        CHECK(what.find("restart the process") != std::string::npos);
    }
    CHECK_FALSE(gpt::take_cuda_error(c10::Device(c10::kCPU)).has_value());  // nothing pends on a CPU
}

TEST_CASE("after a sticky CUDA error every graph call on the model is GPT_ERR_CUDA", "[device_health]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const std::vector<gpt_token> prompt = {1, 2, 3};
    std::vector<float> logits(static_cast<size_t>(model.info.vocab_size));
    {
        test::Session healthy(model.handle);
        REQUIRE(gpt_session_prefill(healthy.handle, prompt.data(), 3, logits.data()) == GPT_OK);
    }
    model.handle->impl->device_health().record_sticky("graph decode_one on cuda:0: cudaErrorIllegalAddress");

    test::Session session(model.handle);
    CHECK(gpt_session_prefill(session.handle, prompt.data(), 3, logits.data()) == GPT_ERR_CUDA);
    CHECK(test::error_mentions("cudaErrorIllegalAddress"));
    CHECK(test::error_mentions("restart the process"));
    double err = 0;
    CHECK(gpt_model_verify(model.handle, &err) == GPT_ERR_CUDA);
    gpt_token ids[8];
    int32_t n = 0;
    CHECK(gpt_model_tokenize(model.handle, "Hi", ids, 8, &n) == GPT_OK);  // no GPU in it
    CHECK(n == 2);
}
