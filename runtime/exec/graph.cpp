// graph.cpp — AOTIModelPackageLoader behind a small interface.
#include "exec/graph.h"

#include <c10/core/DeviceGuard.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>

#include <dlfcn.h>

#include <optional>

#include "base/error.h"
#include "base/log.h"
#include "c_shims.h"  // kernels/: the library compiled graphs bind to
#include "exec/memory.h"
#include "exec/threads.h"
#include "formats/files.h"

namespace gpt {

namespace {

// The container's constant map, name -> its handle, through the runner's own entry point into the graph's
// library (empty where it has none). The runner keeps the container and that entry point to itself
// (protected); a derived class may name them.
struct ContainerConstants : torch::inductor::AOTIModelContainerRunner {
    static std::unordered_map<std::string, AtenTensorHandle> handles(
        const torch::inductor::AOTIModelContainerRunner &runner) {
        std::unordered_map<std::string, AtenTensorHandle> handles;
        const auto extract = runner.*(&ContainerConstants::extract_constants_map_func_);
        const auto container = runner.*(&ContainerConstants::container_handle_);
        if (extract == nullptr || extract(container, reinterpret_cast<AOTInductorConstantMapHandle>(&handles),
                                          /*use_inactive=*/false) != AOTI_RUNTIME_SUCCESS)
            handles.clear();
        return handles;
    }
};

// The artifacts' CPU graphs call the kernel library's C functions (kernels/c_shims.h), which the dynamic linker binds
// in the process's global scope when it loads a graph's library. A process that opened libgpt_runtime with
// RTLD_LOCAL (a plugin host, Python's ctypes) holds them outside that scope, and the graph would fail to load on an
// undefined symbol: reopen libgpt_kernel_shims, where they are defined, RTLD_GLOBAL once (RTLD_NOLOAD: never a second
// copy; the handle is kept). That library depends on libc alone, so nothing else enters the global scope: reopening
// libgpt_runtime itself would put libtorch there too, whose MKL and oneDNN symbols a library the host loads later
// would bind to.
void make_kernel_shims_global() {
    static const bool done = [] {
        Dl_info shims{};
        if (dladdr(reinterpret_cast<void *>(&gpt_kernel_shims_install), &shims) != 0 && shims.dli_fname != nullptr)
            (void)dlopen(shims.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
        return true;
    }();
    (void)done;
}

}  // namespace

Graph::Graph(std::string name, const Bytes &package, c10::Device device, DeviceHealth &health, int num_runners,
             int num_threads, bool capturable)
    : name_(std::move(name)), health_(health), num_threads_(num_threads), capturable_(capturable) {
    // The loader reads a path, so the verified bytes go to a file no one else can write.
    PrivateTempDir dir;
    const std::string file = dir.write(name_ + ".pt2", package);
    make_kernel_shims_global();
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

// torch 2.11's AOTInductor container (aoti_runtime/model_container.h, compiled into each graph's library)
// keeps a user-managed constant as MaybeOwningAtenTensorHandle(handle, user_managed=true): a new handle, a
// heap at::Tensor sharing the bound tensor, that it never deletes. Each one holds its weight's storage, so
// every load and free of a model left all of its weights behind (pytorch/pytorch#194480 makes the map own
// them; an artifact's library keeps the header it was compiled with). So the graph deletes those handles
// once the container is gone, unless the container deleted them itself: then the bound tensors lost the
// container's references, which a leaking container keeps.
Graph::~Graph() {
    std::vector<size_t> uses_before;
    uses_before.reserve(bound_.size());
    for (const BoundConstant &c : bound_) uses_before.push_back(c.tensor.use_count());
    loader_.reset();
    std::vector<bool> left_behind;
    left_behind.reserve(bound_.size());
    for (size_t i = 0; i < bound_.size(); ++i) left_behind.push_back(bound_[i].tensor.use_count() == uses_before[i]);
    for (size_t i = 0; i < bound_.size(); ++i)
        if (left_behind[i]) aoti_torch_delete_tensor_object(bound_[i].handle);
}

void Graph::bind(const std::map<std::string, at::Tensor> &weights) {
    if (!bound_.empty()) fail(GPT_ERR_INTERNAL, "graph '" + name_ + "' is bound already");
    std::unordered_map<std::string, at::Tensor> constants;
    for (const std::string &fqn : loader_->get_constant_fqns()) {
        auto it = weights.find(fqn);
        if (it == weights.end())
            fail(GPT_ERR_ARTIFACT_INVALID,
                 "graph '" + name_ + "' needs weight '" + fqn + "', which the weights file lacks");
        constants.emplace(fqn, it->second);
    }
    loader_->load_constants(constants, /*use_inactive=*/false, /*check_full_update=*/true, /*user_managed=*/true);
    // The container's handles on our tensors (sharing their TensorImpl), for ~Graph.
    for (const auto &[fqn, handle] : ContainerConstants::handles(*loader_->get_runner())) {
        auto it = constants.find(fqn);
        if (it != constants.end() && handle != nullptr &&
            torch::aot_inductor::tensor_handle_to_tensor_pointer(handle)->unsafeGetTensorImpl() ==
                it->second.unsafeGetTensorImpl())
            bound_.push_back({it->second, handle});
    }
    if (bound_.empty() && !constants.empty())
        log(GPT_LOG_WARN, "graph '" + name_ + "' does not give its constants back: its weights outlive the model");
    log(GPT_LOG_DEBUG, "bound " + std::to_string(constants.size()) + " weights to graph " + name_ + " (" +
                           std::to_string(bound_.size()) + " container handles to release)");
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
