// device.h — what this machine offers, and whether an artifact's target fits it.
#pragma once

#include <c10/core/Device.h>

#include <set>
#include <string>

#include "formats/manifest.h"

namespace gpt {

struct Host {
    std::string cpu_arch;             // uname machine, e.g. "x86_64"
    std::set<std::string> cpu_flags;  // /proc/cpuinfo flags, e.g. "avx2"
    int cuda_devices = 0;
    std::string gpu_arch;  // "sm_90" for device 0, "" without a GPU
    std::string gpu_name;
    std::string cuda_version;  // the CUDA runtime this process links (torch's), e.g. "13.0"; "" without CUDA
};

Host detect_host();

// Throws GPT_ERR_DEVICE_MISMATCH / _UNAVAILABLE with expected vs found, and GPT_ERR_TORCH_VERSION for
// a CUDA artifact compiled with another CUDA major than this process's.
void check_target(const TargetSpec &target, const Host &host);

// Artifacts run only under the torch major.minor they were compiled with.
// Throws GPT_ERR_TORCH_VERSION.
void check_torch_version(const std::string &artifact_torch_version);

std::string runtime_torch_version();

// The CUDA device index a model's params ask for: `requested` when >= 0; -1 = `local_rank` (the
// LOCAL_RANK environment variable's value, nullptr when unset) when set, else 0. Throws
// GPT_ERR_INVALID_ARGUMENT for requested < -1 and for a LOCAL_RANK that is no index.
int cuda_device_index(int32_t requested, const char *local_rank);

// Where a model of `target` runs: the CPU, or the CUDA device `cuda_index` (which must exist:
// GPT_ERR_DEVICE_UNAVAILABLE names it and the count).
c10::Device torch_device(const TargetSpec &target, int cuda_index, const Host &host);

}  // namespace gpt
