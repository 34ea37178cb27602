// device_health.cpp — CUDA's pending error after a failed call, and a model's record of a lost device.
#include "exec/device_health.h"

#ifdef GPT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

#include "base/error.h"

namespace gpt {

#ifdef GPT_WITH_CUDA

namespace {

// The errors after which the CUDA context is lost: every later call in the process fails alike.
// Others (a capture refused, an invalid argument, memory) leave the GPU usable.
bool loses_context(cudaError_t error) {
    switch (error) {
        case cudaErrorIllegalAddress:
        case cudaErrorLaunchFailure:
        case cudaErrorIllegalInstruction:
        case cudaErrorMisalignedAddress:
        case cudaErrorInvalidAddressSpace:
        case cudaErrorInvalidPc:
        case cudaErrorHardwareStackError:
        case cudaErrorAssert:
        case cudaErrorECCUncorrectable:
        case cudaErrorLaunchTimeout: return true;
        default: return false;
    }
}

}  // namespace

std::optional<CudaError> take_cuda_error(c10::Device device) {
    if (!device.is_cuda()) return std::nullopt;
    int previous = 0;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    cudaSetDevice(device.index());
    // cudaGetLastError returns and clears an ordinary error; a sticky one comes back from every call after it.
    const cudaError_t pending = cudaGetLastError();
    // The current stream's own work, not the device's: synchronizing the device would break a CUDA
    // graph another session is capturing. While this thread captures, no synchronize at all.
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cudaError_t now = cudaSuccess;
    if (cudaStreamIsCapturing(stream, &capturing) == cudaSuccess && capturing == cudaStreamCaptureStatusNone) {
        now = cudaStreamSynchronize(stream);
        if (now == cudaSuccess) now = cudaGetLastError();
    }
    if (previous >= 0) cudaSetDevice(previous);
    if (pending == cudaSuccess && now == cudaSuccess) return std::nullopt;
    const cudaError_t shown = now != cudaSuccess ? now : pending;
    return CudaError{std::string(cudaGetErrorName(shown)) + ": " + cudaGetErrorString(shown), loses_context(shown)};
}

#else  // built without CUDA: no model runs on a GPU

std::optional<CudaError> take_cuda_error(c10::Device) { return std::nullopt; }

#endif

void throw_pending_cuda_error(c10::Device device, DeviceHealth &health, const std::string &where) {
    const auto cuda = take_cuda_error(device);
    if (!cuda) return;
    const std::string what = where + " on " + device.str() + ": " + cuda->text;
    if (!cuda->sticky) fail(GPT_ERR_CUDA, what);
    health.record_sticky(what);
    health.check();  // throws the sticky failure, in the words every later call gets
}

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
