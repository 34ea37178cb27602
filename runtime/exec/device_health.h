// device_health.h — a GPU's failure as the runtime reports it. A compiled graph that
// fails with a CUDA error pending is GPT_ERR_CUDA in CUDA's own words (AOTInductor's
// exception says only that a call failed). A sticky error — the CUDA context is lost,
// every later CUDA call in the process fails the same way — marks the model's device
// failed for good: every later graph call on the model says so at once.
#pragma once

#include <c10/core/Device.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>

namespace gpt {

struct CudaError {
    std::string text;  // "cudaErrorIllegalAddress: an illegal memory access was encountered"
    bool sticky;       // the context is lost: only a new process runs on this GPU again
};

// After a failed call on `device`: the CUDA error pending there, cleared where CUDA
// can clear it; nullopt for none, for a CPU device, or in a build without CUDA.
// Synchronizes the current stream (where an asynchronous fault shows), unless it is capturing.
std::optional<CudaError> take_cuda_error(c10::Device device);

// Whether a model's device failed with a sticky error. Thread-safe.
class DeviceHealth {
public:
    // Throws GPT_ERR_CUDA with the recorded failure once there is one.
    void check() const;
    // Records the first sticky failure (`what`: where and CUDA's text); later ones keep it.
    void record_sticky(const std::string &what);

private:
    std::atomic<bool> failed_{false};
    mutable std::mutex mutex_;
    std::string failure_;
};

// After a call on `device` failed: with a CUDA error pending, throws GPT_ERR_CUDA naming `where`
// in CUDA's words (a lost context recorded in `health` first, and thrown as every later call gets
// it); returns when there is none, for the caller to rethrow its own error.
void throw_pending_cuda_error(c10::Device device, DeviceHealth &health, const std::string &where);

}  // namespace gpt
