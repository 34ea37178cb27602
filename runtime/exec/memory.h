// memory.h — what a model holds and what its device has used, for the ABI's
// gpt_model_get_memory (the seed tables report peak memory per backend).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace gpt {

struct DeviceMemory {
    uint64_t allocated = 0;  // bytes in live tensors on the GPU (torch's caching allocator)
    uint64_t peak = 0;       // highest `allocated` since start-up or the last reset
    uint64_t reserved = 0;   // bytes the allocator holds from the driver
};

// Zeros for a CPU device, or when the runtime was built without CUDA.
DeviceMemory device_memory(c10::Device device);
// How many allocations on `device` have failed so far (0 for a CPU device).
int64_t device_oom_count(c10::Device device);
void reset_device_peak(c10::Device device);

// The process's peak resident set size, in bytes.
uint64_t host_peak_rss();

}  // namespace gpt
