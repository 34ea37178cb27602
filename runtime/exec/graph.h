// graph.h — one AOTInductor-compiled graph (a .pt2 package) with its weights
// bound as user-managed constants: the graph reads the runtime's tensors, it
// holds no copy of its own.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/device_health.h"
#include "formats/integrity.h"

namespace torch::inductor {
class AOTIModelPackageLoader;
}
struct AtenTensorOpaque;  // AOTInductor's tensor handle (AtenTensorHandle): an at::Tensor *

namespace gpt {

class Graph {
public:
    // Loads the package from already verified bytes (via a private temporary copy), for `device`
    // (a CUDA graph's kernels and constants go to that GPU). Each run uses `num_threads` CPU
    // threads (ScopedThreads; <= 0: the caller's count). `health` is the model's record of its
    // device, which outlives the graph: checked before each run, told of a sticky CUDA error.
    // `capturable`: runs one at a time on AOTInductor's single-threaded path, which records no CUDA
    // event of its own, so that a run can be captured into a CUDA graph (captured_decode.h).
    Graph(std::string name, const Bytes &package, c10::Device device, DeviceHealth &health, int num_runners,
          int num_threads, bool capturable = false);
    ~Graph();
    Graph(const Graph &) = delete;
    Graph &operator=(const Graph &) = delete;

    // Binds every constant the graph declares to the tensor of that name, once. The
    // tensors must outlive the graph; later in-place updates are seen by it.
    void bind(const std::map<std::string, at::Tensor> &weights);

    // Thread-safe: concurrent calls share num_runners instances and queue for them (a capturable
    // graph's calls take turns on one). A failure with
    // a CUDA error pending is GPT_ERR_CUDA (and, when sticky, fails every later run of the model).
    std::vector<at::Tensor> run(const std::vector<at::Tensor> &inputs) const;

    const std::string &name() const { return name_; }

private:
    std::string name_;
    DeviceHealth &health_;
    int num_threads_;
    bool capturable_;
    mutable std::mutex capturable_turn_;  // AOTInductor's single-threaded path is not thread-safe
    std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
    // The container's handle on each bound tensor, which torch 2.11's container never deletes (graph.cpp,
    // ~Graph), beside the tensor it refers to.
    struct BoundConstant {
        at::Tensor tensor;
        AtenTensorOpaque *handle;
    };
    std::vector<BoundConstant> bound_;
};

}  // namespace gpt
