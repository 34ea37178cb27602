// captured_decode.cpp — capture and replay with torch's CUDAGraph, on the session's stream.
#include "exec/captured_decode.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <mutex>

#include "base/error.h"
#include "base/log.h"

#ifdef GPT_WITH_CUDA
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace gpt {

int64_t CapturedDecode::span_bucket(int64_t span, int64_t block_size) {
    int64_t bucket = 16;
    while (bucket < span) bucket *= 2;
    return std::clamp<int64_t>(bucket, 2, block_size);
}

#ifdef GPT_WITH_CUDA

namespace {

// Beginning, ending and destroying a capture touch torch's process-wide state (the default CUDA
// generator's registered graphs, the allocator's pools) without a lock of their own.
std::mutex capture_mutex;

// torch's CUDAGraph, with a way back from a failed capture: its capture_end throws on an
// invalidated capture before it hands the allocators and the generator back, which would leave
// every later allocation in the process routed through a capture that no longer exists.
struct StepGraph : at::cuda::CUDAGraph {
    void abort_capture() noexcept {
        cudaGraph_t partial = nullptr;
        if (cudaStreamEndCapture(capture_stream_.stream(), &partial) == cudaSuccess && partial != nullptr)
            cudaGraphDestroy(partial);
        (void)cudaGetLastError();  // the capture's own error, reported by the caller's exception
        try {
            c10::cuda::CUDACachingAllocator::endAllocateToPool(capture_dev_, mempool_id_);
            at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(mempool_id_);
            // What CUDAGeneratorState::capture_epilogue does (libtorch_cuda does not export it): the
            // generator leaves capture mode, or every later eager random op in the process throws.
            for (auto &entry : captured_generator_states_) entry.first->capturing_ = false;
            c10::cuda::CUDACachingAllocator::releasePool(capture_dev_, mempool_id_);
            at::getHostAllocator(at::kCUDA)->release_pool(mempool_id_);
        } catch (const std::exception &e) {
            log(GPT_LOG_ERROR, std::string("cleaning up a failed CUDA graph capture: ") + e.what());
        }
    }
};

c10::cuda::CUDAStream cuda_stream(c10::Stream stream) {
    return c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream);
}

}  // namespace

struct CapturedDecode::Captured {
    StepGraph graph;
    at::Tensor logits;  // the captured step's output, rewritten by each replay
};

struct CapturedDecode::Staged {
    at::cuda::CUDAEvent copied;
};

CapturedDecode::CapturedDecode(const Model &model, const at::Tensor &kv, c10::Stream stream)
    : model_(model), kv_(kv), stream_(stream) {
    // Rows padded to 8 ids, so that the positions start 64-byte aligned, as the graphs were compiled
    // to expect (a misaligned input is copied first, in every replay).
    const int64_t width = (kv.size(2) + 7) / 8 * 8;
    const c10::cuda::CUDAStreamGuard guard(cuda_stream(stream_));
    inputs_ = at::zeros({2, width}, at::TensorOptions().dtype(at::kLong).device(model.device()));
    staging_ = at::zeros({2, width}, at::TensorOptions().dtype(at::kLong).pinned_memory(true));
    staged_ = std::make_unique<Staged>();
}

CapturedDecode::~CapturedDecode() {
    const std::lock_guard<std::mutex> lock(capture_mutex);
    graphs_.clear();
}

std::unique_ptr<CapturedDecode::Captured> CapturedDecode::capture(int64_t rows, int64_t span) {
    const at::Tensor idx = inputs_.select(0, 0).narrow(0, 0, rows).view({rows, 1});
    const at::Tensor pos = inputs_.select(0, 1).narrow(0, 0, rows);
    const at::Tensor kv = kv_.narrow(2, 0, rows);
    // A plain run first: it loads the kernels and makes cuBLAS's workspace, neither of which may
    // happen while capturing. It writes the same cache entries the replay writes after it.
    model_.decode(idx, pos, kv, span);
    auto captured = std::make_unique<Captured>();
    const std::lock_guard<std::mutex> lock(capture_mutex);
    try {
        // Thread-local mode: other threads (other sessions, prefills) go on with their own CUDA calls meanwhile.
        captured->graph.capture_begin(pool_, cudaStreamCaptureModeThreadLocal);
        captured->logits = model_.decode(idx, pos, kv, span);
        captured->graph.capture_end();
    } catch (const std::exception &e) {
        captured->logits = at::Tensor();
        captured->graph.abort_capture();
        log(GPT_LOG_WARN, "decode of " + std::to_string(rows) + " row(s) could not be captured as a CUDA graph (" +
                              e.what() + "): this model's decode steps run as plain launches from now on");
        model_.capture_failed();
        return nullptr;
    }
    if (pool_ == c10::MempoolId_t{0, 0}) pool_ = captured->graph.pool();  // shared by every later capture
    log(GPT_LOG_DEBUG, "captured decode of " + std::to_string(rows) + " row(s) over " + std::to_string(span) +
                           " positions as a CUDA graph");
    return captured;
}

at::Tensor CapturedDecode::step(const std::vector<int64_t> &ids, const std::vector<int64_t> &pos, int64_t span) {
    const auto rows = static_cast<int64_t>(ids.size());
    if (rows < 1 || rows > kv_.size(2) || pos.size() != ids.size())
        fail(GPT_ERR_INTERNAL, "a captured decode step needs 1 to n_seq rows, each with a position");
    model_.device_health().check();  // a replay bypasses the graphs' own check
    span = span_bucket(span, model_.config().block_size);
    const c10::cuda::CUDAStreamGuard guard(cuda_stream(stream_));
    staged_->copied.synchronize();  // the previous step's copy out of staging_ is done (it may have failed unwaited)
    int64_t *host = staging_.data_ptr<int64_t>();
    std::copy(ids.begin(), ids.end(), host);
    std::copy(pos.begin(), pos.end(), host + staging_.size(1));
    inputs_.copy_(staging_, /*non_blocking=*/true);
    staged_->copied.record(cuda_stream(stream_));
    auto it = graphs_.find({rows, span});
    if (it == graphs_.end()) {
        std::unique_ptr<Captured> captured = capture(rows, span);
        if (!captured) return at::Tensor();  // not capturable: the caller runs the step itself
        it = graphs_.emplace(std::make_pair(rows, span), std::move(captured)).first;
    }
    it->second->graph.replay();
    return it->second->logits;
}

#else  // built without CUDA: no model runs on a GPU, so no session makes one

struct CapturedDecode::Captured {};
struct CapturedDecode::Staged {};

CapturedDecode::CapturedDecode(const Model &model, const at::Tensor &kv, c10::Stream stream)
    : model_(model), kv_(kv), stream_(stream) {
    fail(GPT_ERR_DEVICE_UNAVAILABLE, "this runtime was built without CUDA: no CUDA graphs");
}

CapturedDecode::~CapturedDecode() = default;

std::unique_ptr<CapturedDecode::Captured> CapturedDecode::capture(int64_t, int64_t) { return nullptr; }

at::Tensor CapturedDecode::step(const std::vector<int64_t> &, const std::vector<int64_t> &, int64_t) {
    fail(GPT_ERR_DEVICE_UNAVAILABLE, "this runtime was built without CUDA: no CUDA graphs");
}

#endif

}  // namespace gpt
