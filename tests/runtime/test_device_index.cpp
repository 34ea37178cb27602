// Which GPU a CUDA model runs on: gpt_model_params.device_index, else LOCAL_RANK (each rank of a
// data-parallel job its own GPU), else 0. Hosts with GPUs are simulated (gpt::Host), so every rule
// is checked without one.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "artifact/device.h"
#include "base/error.h"
#include "test_support.h"

namespace {

gpt_status index_status(int32_t requested, const char *local_rank, int *index, std::string *message) {
    try {
        *index = gpt::cuda_device_index(requested, local_rank);
        return GPT_OK;
    } catch (const gpt::Error &e) {
        *message = e.what();
        return e.status();
    }
}

}  // namespace

TEST_CASE("device_index picks the GPU, else LOCAL_RANK, else GPU 0", "[device]") {
    CHECK(gpt::cuda_device_index(2, "5") == 2);  // asked for: LOCAL_RANK does not override it
    CHECK(gpt::cuda_device_index(0, "5") == 0);
    CHECK(gpt::cuda_device_index(-1, "3") == 3);  // rank 3 of `gpt train --nproc 4` on cuda:3
    CHECK(gpt::cuda_device_index(-1, "0") == 0);
    CHECK(gpt::cuda_device_index(-1, nullptr) == 0);

    int index = -1;
    std::string message;
    for (const char *bad : {"", "x", "1x", "-1", " 2", "99999999999"}) {
        INFO("LOCAL_RANK=\"" << bad << "\"");
        CHECK(index_status(-1, bad, &index, &message) == GPT_ERR_INVALID_ARGUMENT);
        CHECK(message.find("LOCAL_RANK=\"" + std::string(bad) + "\" is no device index") != std::string::npos);
    }
    CHECK(index_status(-2, nullptr, &index, &message) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(message.find("device_index -2") != std::string::npos);
}

TEST_CASE("a CUDA model goes to the asked GPU, which must exist; a CPU model stays on the CPU", "[device]") {
    gpt::Host host = gpt::detect_host();
    host.cuda_devices = 2;
    host.gpu_arch = "sm_90";
    gpt::TargetSpec cuda;
    cuda.device = "cuda";
    cuda.arch = "sm_90";
    CHECK(gpt::torch_device(cuda, 1, host) == c10::Device(c10::DeviceType::CUDA, 1));
    CHECK(gpt::torch_device(cuda, 0, host) == c10::Device(c10::DeviceType::CUDA, 0));
    try {
        gpt::torch_device(cuda, 2, host);
        FAIL("a third GPU on a machine of two");
    } catch (const gpt::Error &e) {
        CHECK(e.status() == GPT_ERR_DEVICE_UNAVAILABLE);
        CHECK(std::string(e.what()).find("CUDA device 2 was asked for; this machine has 2") != std::string::npos);
    }
    gpt::TargetSpec cpu;
    cpu.device = "cpu";
    CHECK(gpt::torch_device(cpu, 1, host) == c10::Device(c10::DeviceType::CPU));
}

TEST_CASE("through the C API: device_index defaults to -1, a CPU model ignores it and LOCAL_RANK", "[device][abi]") {
    gpt_model_params params;
    REQUIRE(gpt_model_default_params(&params, sizeof params) == GPT_OK);
    CHECK(params.device_index == -1);

    params.device_index = 3;
    REQUIRE(::setenv("LOCAL_RANK", "not a rank", 1) == 0);  // read for CUDA models only
    gpt_model *model = nullptr;
    CHECK(gpt_model_load(test::artifact("flash").c_str(), &params, &model) == GPT_OK);
    CHECK(gpt_model_free(model) == GPT_OK);
    ::unsetenv("LOCAL_RANK");

    params.device_index = -2;
    model = nullptr;
    CHECK(gpt_model_load(test::artifact("flash").c_str(), &params, &model) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(model == nullptr);
    CHECK(std::string(gpt_runtime_last_error()).find("device_index must be -1") != std::string::npos);
}
