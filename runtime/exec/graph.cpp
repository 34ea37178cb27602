// graph.cpp — AOTIModelPackageLoader behind a small interface.
#include "exec/graph.h"

#include <c10/core/DeviceGuard.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <optional>

#include "base/error.h"
#include "base/log.h"
#include "exec/memory.h"
#include "exec/threads.h"
#include "formats/files.h"

namespace gpt {

Graph::Graph(std::string name, const Bytes &package, c10::Device device, DeviceHealth &health, int num_runners,
             int num_threads, bool capturable)
    : name_(std::move(name)), health_(health), num_threads_(num_threads), capturable_(capturable) {
    // The loader reads a path, so the verified bytes go to a file no one else can write.
    PrivateTempDir dir;
    const std::string file = dir.write(name_ + ".pt2", package);
    try {
        loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
            // The single-threaded path takes one instance (torch refuses more); its calls take turns.
            file, "model", /*run_single_threaded=*/capturable_,
            capturable_ ? size_t{1} : static_cast<size_t>(num_runners),
            device.is_cuda() ? device.index() : c10::DeviceIndex{-1});
    } catch (const std::exception &e) {
        fail(GPT_ERR_ARTIFACT_INVALID, "graph '" + name_ + "' failed to load: " + e.what());
    }
    log(GPT_LOG_DEBUG,
        "loaded graph " + name_ +
            (capturable_ ? " (one runner, capturable)" : " (" + std::to_string(num_runners) + " runner(s))"));
}

Graph::~Graph() = default;

void Graph::bind(const std::map<std::string, at::Tensor> &weights) {
    std::unordered_map<std::string, at::Tensor> constants;
    for (const std::string &fqn : loader_->get_constant_fqns()) {
        auto it = weights.find(fqn);
        if (it == weights.end())
            fail(GPT_ERR_ARTIFACT_INVALID,
                 "graph '" + name_ + "' needs weight '" + fqn + "', which the weights file lacks");
        constants.emplace(fqn, it->second);
    }
    loader_->load_constants(constants, /*use_inactive=*/false, /*check_full_update=*/true, /*user_managed=*/true);
    log(GPT_LOG_DEBUG, "bound " + std::to_string(constants.size()) + " weights to graph " + name_);
}

std::vector<at::Tensor> Graph::run(const std::vector<at::Tensor> &inputs) const {
    // The compiled code reports a failed allocation as a generic error; the
    // allocator's count of failures tells the caller it was memory (another
    // thread's failure in the same instant could be taken for this one's).
    health_.check();
    const c10::Device device = inputs.empty() ? c10::Device(c10::kCPU) : inputs.front().device();
    const int64_t ooms_before = device_oom_count(device);
    const ScopedThreads threads(num_threads_);
    // The model's GPU is the current device for the call, whichever the calling thread had: a model on
    // cuda:1 (device_index, LOCAL_RANK) runs its kernels and allocates there. A no-op on the CPU.
    const c10::OptionalDeviceGuard device_guard(device.is_cuda() ? std::optional<c10::Device>(device) : std::nullopt);
    std::unique_lock<std::mutex> turn(capturable_turn_, std::defer_lock);
    if (capturable_) turn.lock();
    try {
        return loader_->run(inputs);
    } catch (const c10::OutOfMemoryError &) {
        throw;
    } catch (const std::exception &e) {
        if (device_oom_count(device) != ooms_before)
            fail(GPT_ERR_OUT_OF_MEMORY, "graph " + name_ + " ran out of device memory: " + e.what());
        throw_pending_cuda_error(device, health_, "graph " + name_);
        throw;
    }
}

}  // namespace gpt
