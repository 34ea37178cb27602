// device.cpp — host detection (CPU arch and ISA flags, CUDA devices) and target checks.
#include "artifact/device.h"

#include <sys/utsname.h>
#include <torch/headeronly/version.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#ifdef GPT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "base/error.h"

namespace gpt {

namespace {

// What this CPU may run, as the kernel sees it: the flags every processor in cpuinfo shows. GPT_CPUINFO names
// another file (tests; containers whose /proc is masked). The compile reads the same
// (aot/gpt_aot/compiler/isa.py): CPUID also reports extensions the kernel has disabled, and a native compile
// leaves those out, so both sides agree.
std::set<std::string> read_cpu_flags() {
    const char *path = std::getenv("GPT_CPUINFO");
    std::ifstream in(path != nullptr && *path != '\0' ? path : "/proc/cpuinfo");
    std::set<std::string> common;
    bool first = true;
    std::string line;
    while (std::getline(in, line)) {
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::istringstream key_words(line.substr(0, colon));
        std::string key;
        key_words >> key;
        if (key != "flags" && key != "Features") continue;  // x86 lists "flags", Arm lists "Features"
        std::string rest;
        if (key_words >> rest) continue;  // "vmx flags" and the like: not the CPU's own list
        std::set<std::string> flags;
        std::istringstream words(line.substr(colon + 1));
        for (std::string w; words >> w;) flags.insert(w);
        if (first) {
            common = std::move(flags);
            first = false;
        } else {
            for (auto it = common.begin(); it != common.end();)
                it = flags.count(*it) != 0 ? std::next(it) : common.erase(it);
        }
    }
    return common;
}

}  // namespace

Host detect_host() {
    Host host;
    struct utsname u {};
    if (uname(&u) == 0) host.cpu_arch = u.machine;
    host.cpu_flags = read_cpu_flags();
#ifdef GPT_WITH_CUDA
    // The runtime library's version needs no device: cudaRuntimeGetVersion answers without a GPU.
    int runtime_version = 0;
    if (cudaRuntimeGetVersion(&runtime_version) == cudaSuccess && runtime_version > 0)
        host.cuda_version = std::to_string(runtime_version / 1000) + "." + std::to_string(runtime_version % 1000 / 10);
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
            host.cuda_devices = count;
            host.gpu_arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
            host.gpu_name = prop.name;
        }
    } else {
        cudaGetLastError();  // clear the sticky "no device" error
    }
#endif
    return host;
}

void check_target(const TargetSpec &target, const Host &host) {
    if (target.device == "cpu") {
        if (target.arch != host.cpu_arch)
            fail(GPT_ERR_DEVICE_MISMATCH, "artifact is for CPU " + target.arch + ", this machine is " + host.cpu_arch +
                                              ": use an artifact compiled on a " + host.cpu_arch + " machine");
        // Every extension the compiler was allowed to use: code built for a newer CPU dies with SIGILL on
        // an older one, at whichever kernel first reaches a missing instruction.
        std::string missing;
        for (const std::string &ext : target.isa_extensions)
            if (host.cpu_flags.count(ext) == 0) missing += (missing.empty() ? "" : " ") + ext;
        if (!missing.empty())
            fail(GPT_ERR_DEVICE_MISMATCH,
                 "artifact's CPU code (ISA level " + target.isa_level + ") may use " + missing +
                     ", which this CPU lacks: use an artifact compiled for an ISA level this CPU runs "
                     "(`python -m gpt_aot compile --isa x86-64-v3` runs on any AVX2 CPU), or compile one here");
        return;
    }
    if (target.device == "cuda") {
        if (host.cuda_devices == 0)
            fail(GPT_ERR_DEVICE_UNAVAILABLE, "artifact is for " + target.arch +
                                                 " but no CUDA GPU is present (or the driver is missing): "
                                                 "use the model's cpu artifact or run on a GPU machine");
        // AOTInductor's CUDA code calls the CUDA runtime of the torch that compiled it: under another major
        // it fails to load with an undefined symbol, which would read as a damaged artifact.
        const auto major = [](const std::string &version) { return version.substr(0, version.find('.')); };
        if (!target.cuda_version.empty() && !host.cuda_version.empty() &&
            major(target.cuda_version) != major(host.cuda_version))
            fail(GPT_ERR_TORCH_VERSION, "artifact was compiled with CUDA " + target.cuda_version +
                                            ", this runtime's torch uses CUDA " + host.cuda_version +
                                            ": recompile the artifact with a torch built for CUDA " +
                                            major(host.cuda_version) + ".x");
        if (target.arch != host.gpu_arch)
            fail(GPT_ERR_DEVICE_MISMATCH, "artifact is " + target.arch + ", this GPU is " + host.gpu_arch + " (" +
                                              host.gpu_name + "): use the artifact built for " + host.gpu_arch);
        return;
    }
    fail(GPT_ERR_DEVICE_MISMATCH, "artifact targets unknown device '" + target.device + "'");
}

std::string runtime_torch_version() {
    return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
           std::to_string(TORCH_VERSION_PATCH);
}

void check_torch_version(const std::string &artifact_torch_version) {
    const std::string runtime_minor = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
    // "2.11.0+cu130" -> "2.11"
    const size_t first = artifact_torch_version.find('.');
    const size_t second = first == std::string::npos ? first : artifact_torch_version.find('.', first + 1);
    const std::string artifact_minor = artifact_torch_version.substr(0, second);
    if (artifact_minor != runtime_minor)
        fail(GPT_ERR_TORCH_VERSION, "artifact was compiled with torch " + artifact_torch_version +
                                        ", this runtime uses torch " + runtime_torch_version() +
                                        ": recompile the artifact with torch " + runtime_minor + ".x");
}

int cuda_device_index(int32_t requested, const char *local_rank) {
    if (requested >= 0) return requested;
    if (requested != -1)
        fail(GPT_ERR_INVALID_ARGUMENT,
             "device_index " + std::to_string(requested) + " is no CUDA device: -1 (LOCAL_RANK, else 0) or >= 0");
    if (local_rank == nullptr) return 0;
    char *end = nullptr;
    errno = 0;
    const long index = std::strtol(local_rank, &end, 10);
    const bool digits_only = std::isdigit(static_cast<unsigned char>(*local_rank)) != 0 && *end == '\0';
    if (!digits_only || errno != 0 || index > INT16_MAX)
        fail(GPT_ERR_INVALID_ARGUMENT,
             std::string("LOCAL_RANK=\"") + local_rank +
                 "\" is no device index: unset it or set it to this process's GPU (0, 1, ...)");
    return static_cast<int>(index);
}

c10::Device torch_device(const TargetSpec &target, int cuda_index, const Host &host) {
    if (target.device != "cuda") return c10::Device(c10::DeviceType::CPU);
    if (cuda_index >= host.cuda_devices)
        fail(GPT_ERR_DEVICE_UNAVAILABLE, "CUDA device " + std::to_string(cuda_index) +
                                             " was asked for; this machine has " + std::to_string(host.cuda_devices) +
                                             " (device_index, or LOCAL_RANK)");
    return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(cuda_index));
}

}  // namespace gpt
