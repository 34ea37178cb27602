// test_server_readiness.cpp — gpt-server's /readyz answer from the served model's
// state. A generation that fails with GPT_ERR_CUDA marks the model's device failed
// and /readyz answers 503 from then on; no other status does. No CPU run can make
// the runtime return GPT_ERR_CUDA, so these cases feed the statuses to
// ServedModel::note_status, the call every generation's status goes through
// (deploy/server/model_slot.h), and read readiness() as both /readyz routes do.
#include <catch2/catch.hpp>

#include "model_slot.h"
#include "readiness.h"
#include "test_support.h"

using server::readiness;

TEST_CASE("readyz turns 503 after GPT_ERR_CUDA and stays there; other errors leave it ready") {
    server::ServedModel model;  // no runtime model behind it: only its state is read
    model.info.name = "tiny";
    CHECK(readiness(&model, false).status == 200);
    for (gpt_status s : {GPT_OK, GPT_ERR_ABORTED, GPT_ERR_OUT_OF_MEMORY, GPT_ERR_INVALID_ARGUMENT, GPT_ERR_INTERNAL})
        model.note_status(s);
    CHECK(readiness(&model, false).status == 200);
    model.note_status(GPT_ERR_CUDA);
    const server::Readiness failed = readiness(&model, false);
    CHECK(failed.status == 503);
    CHECK(failed.text == "device failed: tiny\n");
    model.note_status(GPT_OK);  // a later success on the same model does not make it ready again
    CHECK(readiness(&model, false).status == 503);
}

TEST_CASE("readyz is 503 without a model and while draining") {
    CHECK(readiness(nullptr, false).status == 503);
    server::ServedModel model;
    model.info.name = "tiny";
    CHECK(readiness(&model, true).status == 503);
    CHECK(readiness(&model, true).text == "draining\n");
}

TEST_CASE("a failed device marks the model being served, and a reload that verifies replaces it") {
    server::ModelSlot slot({1, 1, false, std::nullopt});
    const std::string dir = test::artifact().string();
    REQUIRE(slot.load(dir).status == GPT_OK);
    const auto failing = slot.current();
    failing->note_status(GPT_ERR_CUDA);
    CHECK(readiness(slot.current().get(), false).status == 503);
    REQUIRE(slot.load(dir).status == GPT_OK);  // its golden vector ran again, on the same device
    CHECK(readiness(slot.current().get(), false).status == 200);
    CHECK(failing->device_failed());  // requests still holding the old model see it failed
}
