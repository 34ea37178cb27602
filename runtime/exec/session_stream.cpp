// session_stream.cpp — the lease of torch's pool streams among live sessions.
#include "exec/session_stream.h"

#include <mutex>
#include <set>

#include "base/error.h"

#ifdef GPT_WITH_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace gpt {

#ifdef GPT_WITH_CUDA

namespace {

constexpr int kPoolStreams = 32;  // c10::cuda's pool of low-priority streams per device

std::mutex leases_mutex;
std::set<cudaStream_t> &leased() {
    static std::set<cudaStream_t> streams;  // held by live sessions, of every device
    return streams;
}

}  // namespace

SessionStream::SessionStream(c10::Device device) : stream_(c10::Stream::DEFAULT, device) {
    const std::lock_guard<std::mutex> lock(leases_mutex);
    for (int i = 0; i < kPoolStreams; ++i) {  // the pool hands its streams out in turn
        const c10::cuda::CUDAStream candidate = c10::cuda::getStreamFromPool(false, device.index());
        if (leased().insert(candidate.stream()).second) {
            stream_ = candidate.unwrap();
            return;
        }
    }
    const c10::cuda::CUDAGuard on_device(device.index());
    cudaStream_t own = nullptr;
    C10_CUDA_CHECK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
    leased().insert(own);
    created_ = true;
    stream_ = c10::cuda::getStreamFromExternal(own, device.index()).unwrap();
}

SessionStream::~SessionStream() {
    const cudaStream_t stream = c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream_).stream();
    if (created_) {
        // Its memory goes back to the caching allocator only once the work on it is done.
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }
    const std::lock_guard<std::mutex> lock(leases_mutex);
    leased().erase(stream);
}

#else  // built without CUDA: no model runs on a GPU, so no session asks for a stream

SessionStream::SessionStream(c10::Device device) : stream_(c10::Stream::DEFAULT, device) {
    fail(GPT_ERR_DEVICE_UNAVAILABLE, "this runtime was built without CUDA: no CUDA streams");
}

SessionStream::~SessionStream() = default;

#endif

}  // namespace gpt
