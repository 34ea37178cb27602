// captured_decode.cpp — capture and replay with torch's CUDAGraph, on the session's stream.
#include "exec/captured_decode.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <mutex>

#include "base/error.h"
#include "base/log.h"
#include "exec/device_sampling.h"

#ifdef GPT_WITH_CUDA
#include <ATen/core/CachingHostAllocator.h>
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
// every later allocation in the process routed through a capture that no longer exists. Each
// step is tried on its own: capture_begin may have failed before setting some of them up.
struct StepGraph : at::cuda::CUDAGraph {
    void abort_capture() noexcept {
        // What CUDAGeneratorState::capture_epilogue does (libtorch_cuda does not export it), first: left
        // in capture mode, the default generator fails every later eager random op in the process.
        for (auto &entry : captured_generator_states_) entry.first->capturing_ = false;
        cudaGraph_t partial = nullptr;
        if (cudaStreamEndCapture(capture_stream_.stream(), &partial) == cudaSuccess && partial != nullptr)
            cudaGraphDestroy(partial);
        (void)cudaGetLastError();  // the capture's own error, reported by the caller's exception
        const auto attempt = [](const char *what, const auto &call) {
            try {
                call();
            } catch (const std::exception &e) {
                log(GPT_LOG_DEBUG, std::string("undoing a failed CUDA graph capture, ") + what + ": " + e.what());
            }
        };
        attempt("device pool", [&] { c10::cuda::CUDACachingAllocator::endAllocateToPool(capture_dev_, mempool_id_); });
        attempt("host pool", [&] { at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(mempool_id_); });
        if (capture_ended_) return;  // reset(), from the destructor, releases the pools of an ended capture
        attempt("device pool release",
                [&] { c10::cuda::CUDACachingAllocator::releasePool(capture_dev_, mempool_id_); });
        attempt("host pool release", [&] { at::getHostAllocator(at::kCUDA)->release_pool(mempool_id_); });
    }
};

c10::cuda::CUDAStream cuda_stream(c10::Stream stream) {
    return c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream);
}

}  // namespace

struct CapturedDecode::Captured {
    StepGraph graph;
    CapturedDecode::Step out;  // the captured step's outputs, rewritten by each replay
};

CapturedDecode::CapturedDecode(const Model &model, const at::Tensor &kv, c10::Stream stream)
    : model_(model), kv_(kv), stream_(stream) {
    // Rows padded to 8 ids, so that the positions start 64-byte aligned, as the graphs were compiled
    // to expect (a misaligned input is copied first, in every replay).
    const int64_t width = (kv.size(2) + 7) / 8 * 8;
    const c10::cuda::CUDAStreamGuard guard(cuda_stream(stream_));
    inputs_ = at::zeros({2, width}, at::TensorOptions().dtype(at::kLong).device(model.device()));
}

CapturedDecode::~CapturedDecode() {
    const std::lock_guard<std::mutex> lock(capture_mutex);
    graphs_.clear();
}

std::unique_ptr<CapturedDecode::Captured> CapturedDecode::capture(int64_t rows, int64_t span) {
    const at::Tensor idx = inputs_.select(0, 0).narrow(0, 0, rows).view({rows, 1});
    const at::Tensor pos = inputs_.select(0, 1).narrow(0, 0, rows);
    const at::Tensor kv = kv_.narrow(2, 0, rows);
    // A plain run of everything captured first: it loads the kernels (CUDA loads modules lazily)
    // and makes cuBLAS's workspace, neither of which may happen while capturing. It writes the
    // same cache entries the replay writes after it.
    greedy_choice(model_.decode(idx, pos, kv, span), model_.config().vocab_size);
    const std::lock_guard<std::mutex> lock(capture_mutex);  // held until the graph is kept or destroyed
    auto captured = std::make_unique<Captured>();
    const auto undo = [&] {
        captured->out = Step();
        captured->graph.abort_capture();
        captured.reset();  // ~CUDAGraph unregisters from the default generator: under the lock
    };
    try {
        // Thread-local mode: other threads (other sessions, prefills) go on with their own CUDA calls meanwhile.
        captured->graph.capture_begin(pool_, cudaStreamCaptureModeThreadLocal);
        // Model::decode masks the ids without text: the mask is captured too, so the greedy choice
        // in the graph never picks one, as the plain step's samplers do not.
        captured->out.logits = model_.decode(idx, pos, kv, span);
        captured->out.greedy = greedy_choice(captured->out.logits, model_.config().vocab_size);
        captured->graph.capture_end();
    } catch (const c10::OutOfMemoryError &) {
        undo();  // short of memory now, not uncapturable: the next step tries again
        throw;
    } catch (const std::exception &e) {
        undo();
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

CapturedDecode::Step CapturedDecode::step(const std::vector<int64_t> &ids, const std::vector<int64_t> &pos,
                                          int64_t span) {
    const auto rows = static_cast<int64_t>(ids.size());
    if (rows < 1 || rows > kv_.size(2) || pos.size() != ids.size())
        fail(GPT_ERR_INTERNAL, "a captured decode step needs 1 to n_seq rows, each with a position");
    model_.device_health().check();  // a replay bypasses the graphs' own check
    span = span_bucket(span, model_.config().block_size);
    const c10::cuda::CUDAStreamGuard guard(cuda_stream(stream_));
    // From pageable memory: CUDA has taken the bytes when the copy returns, so nothing on the host
    // waits for the stream, and no pinned block outlives a fault (its release would record an event).
    std::vector<int64_t> host(static_cast<size_t>(inputs_.numel()), 0);
    std::copy(ids.begin(), ids.end(), host.begin());
    std::copy(pos.begin(), pos.end(), host.begin() + inputs_.size(1));
    inputs_.copy_(at::from_blob(host.data(), inputs_.sizes(), at::kLong), /*non_blocking=*/true);
    auto it = graphs_.find({rows, span});
    if (it == graphs_.end()) {
        std::unique_ptr<Captured> captured = capture(rows, span);
        if (!captured) return Step();  // not capturable: the caller runs the step itself
        it = graphs_.emplace(std::make_pair(rows, span), std::move(captured)).first;
    }
    it->second->graph.replay();
    return it->second->out;
}

#else  // built without CUDA: no model runs on a GPU, so no session makes one

struct CapturedDecode::Captured {};

CapturedDecode::CapturedDecode(const Model &model, const at::Tensor &kv, c10::Stream stream)
    : model_(model), kv_(kv), stream_(stream) {
    fail(GPT_ERR_DEVICE_UNAVAILABLE, "this runtime was built without CUDA: no CUDA graphs");
}

CapturedDecode::~CapturedDecode() = default;

std::unique_ptr<CapturedDecode::Captured> CapturedDecode::capture(int64_t, int64_t) { return nullptr; }

CapturedDecode::Step CapturedDecode::step(const std::vector<int64_t> &, const std::vector<int64_t> &, int64_t) {
    fail(GPT_ERR_DEVICE_UNAVAILABLE, "this runtime was built without CUDA: no CUDA graphs");
}

#endif

}  // namespace gpt
