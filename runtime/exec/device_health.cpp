// device_health.cpp — CUDA's pending error after a failed call, and a model's record of a lost device.
#include "exec/device_health.h"

#ifdef GPT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

#include "base/error.h"

namespace gpt {

#ifdef GPT_WITH_CUDA

std::optional<CudaError> take_cuda_error(c10::Device device) {
    if (!device.is_cuda()) return std::nullopt;
    int previous = 0;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    cudaSetDevice(device.index());
    // cudaGetLastError returns and clears an ordinary error; a sticky one comes back from every call after it.
    const cudaError_t pending = cudaGetLastError();
    // A failure while this thread captures a CUDA graph: a synchronize would itself fail (and
    // end the capture), so only the pending error counts, never as a lost context.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(c10::cuda::getCurrentCUDAStream(device.index()).stream(), &capturing) == cudaSuccess &&
        capturing != cudaStreamCaptureStatusNone) {
        if (previous >= 0) cudaSetDevice(previous);
        if (pending == cudaSuccess) return std::nullopt;
        return CudaError{std::string(cudaGetErrorName(pending)) + ": " + cudaGetErrorString(pending), false};
    }
    cudaError_t now = cudaDeviceSynchronize();
    if (now == cudaSuccess) now = cudaGetLastError();
    if (previous >= 0) cudaSetDevice(previous);
    if (pending == cudaSuccess && now == cudaSuccess) return std::nullopt;
    const cudaError_t shown = now != cudaSuccess ? now : pending;
    return CudaError{std::string(cudaGetErrorName(shown)) + ": " + cudaGetErrorString(shown), now != cudaSuccess};
}

#else  // built without CUDA: no model runs on a GPU

std::optional<CudaError> take_cuda_error(c10::Device) { return std::nullopt; }

#endif

void DeviceHealth::check() const {
    if (!failed_.load(std::memory_order_acquire)) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    fail(GPT_ERR_CUDA, "this model's GPU failed earlier (" + failure_ +
                           "): its CUDA context is lost; restart the process to use the GPU again");
}

void DeviceHealth::record_sticky(const std::string &what) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (failed_.load(std::memory_order_relaxed)) return;
    failure_ = what;
    failed_.store(true, std::memory_order_release);
}

}  // namespace gpt
