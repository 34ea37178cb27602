// collectives.h — the process group a distributed trainer talks through:
// rendezvous, broadcast and sum-all-reduce on PyTorch's c10d (Gloo on CPU, NCCL
// on CUDA). collectives.cpp is the only file that includes c10d and gloo.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>

#include "gpt_runtime.h"

namespace gpt {

// gpt_dist_params after validation, with its own copy of the address.
struct DistConfig {
    int world_size = 1;
    int rank = 0;
    std::string master_addr;
    int master_port = 0;
    int timeout_ms = 0;
    int64_t bucket_bytes = 0;
};

// Throws GPT_ERR_INVALID_ARGUMENT on an impossible configuration.
DistConfig validate_dist_params(const gpt_dist_params &params);

// torch's NCCL settings under which a dead or hung peer is GPT_ERR_PEER_FAILED within the timeout
// instead of NCCL's watchdog ending the process: each (variable, value), set before an NCCL group
// is made unless the environment already sets the variable (an operator's choice wins).
//   TORCH_NCCL_BLOCKING_WAIT=1         wait() blocks and throws at the timeout (the default only
//                                      orders streams; a timeout is then the watchdog's to handle)
//   TORCH_NCCL_ASYNC_ERROR_HANDLING=2  on an error, abort the communicators, not the process
//   TORCH_NCCL_ENABLE_MONITORING=0     no second watchdog that ends a process whose first is stuck
void use_nccl_error_handling();

// One rank's view of the job. Collectives are started in the same order on every
// rank and complete at wait_all(); a peer that dies or outlives the timeout turns
// into GPT_ERR_PEER_FAILED, after which every call fails fast.
class ProcessGroup {
public:
    // Blocks until all ranks have joined (GPT_ERR_PEER_FAILED after the timeout).
    ProcessGroup(const DistConfig &config, c10::Device device);
    ~ProcessGroup();
    ProcessGroup(const ProcessGroup &) = delete;
    ProcessGroup &operator=(const ProcessGroup &) = delete;

    int rank() const { return config_.rank; }
    int world_size() const { return config_.world_size; }

    // Start replacing `tensor` by its sum over ranks / by rank `root`'s copy.
    // The tensor must stay alive and untouched until wait_all().
    void start_sum(const at::Tensor &tensor);
    void start_broadcast(const at::Tensor &tensor, int root);
    // Waits for every started collective, in start order.
    void wait_all();

private:
    struct Backend;  // c10d objects, defined in collectives.cpp
    [[noreturn]] void peer_failed(const std::string &during, const std::string &cause);
    void check_usable() const;

    DistConfig config_;
    std::unique_ptr<Backend> backend_;
    bool broken_ = false;
};

}  // namespace gpt
