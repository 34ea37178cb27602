// captured_decode.cpp — capture and replay with torch's CUDAGraph, on the session's stream.
#include "exec/captured_decode.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "base/error.h"
#include "base/log.h"

#ifdef GPT_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
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

struct CapturedDecode::Captured {
    at::cuda::CUDAGraph graph;
    at::Tensor logits;  // the captured step's output, rewritten by each replay
};

CapturedDecode::CapturedDecode(const Model &model, const at::Tensor &kv, c10::Stream stream)
    : model_(model), kv_(kv), stream_(stream) {
    const int64_t n_seq = kv.size(2);
    const c10::cuda::CUDAStreamGuard guard(c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream_));
    inputs_ = at::zeros({2, n_seq}, at::TensorOptions().dtype(at::kLong).device(model.device()));
    staging_ = at::zeros({2, n_seq}, at::TensorOptions().dtype(at::kLong).pinned_memory(true));
}

CapturedDecode::~CapturedDecode() = default;

std::unique_ptr<CapturedDecode::Captured> CapturedDecode::capture(int64_t rows, int64_t span) {
    const at::Tensor idx = inputs_.select(0, 0).narrow(0, 0, rows).view({rows, 1});
    const at::Tensor pos = inputs_.select(0, 1).narrow(0, 0, rows);
    const at::Tensor kv = kv_.narrow(2, 0, rows);
    // A plain run first: it loads the kernels and makes cuBLAS's workspace, neither of which may
    // happen while capturing. It writes the same cache entries the replay writes after it.
    model_.decode(idx, pos, kv, span);
    auto captured = std::make_unique<Captured>();
    // Thread-local mode: other threads (other sessions, prefills) go on with their own CUDA calls meanwhile.
    captured->graph.capture_begin(pool_, cudaStreamCaptureModeThreadLocal);
    try {
        captured->logits = model_.decode(idx, pos, kv, span);
    } catch (...) {
        try {
            captured->graph.capture_end();  // leaves the stream usable; the capture itself is discarded
        } catch (...) {
        }
        throw;
    }
    captured->graph.capture_end();
    pool_ = captured->graph.pool();  // the first capture's pool, shared by every later one
    log(GPT_LOG_DEBUG, "captured decode of " + std::to_string(rows) + " row(s) over " + std::to_string(span) +
                           " positions as a CUDA graph");
    return captured;
}

at::Tensor CapturedDecode::step(const std::vector<int64_t> &ids, const std::vector<int64_t> &pos, int64_t span) {
    const auto rows = static_cast<int64_t>(ids.size());
    if (rows < 1 || rows > inputs_.size(1) || pos.size() != ids.size())
        fail(GPT_ERR_INTERNAL, "a captured decode step needs 1 to n_seq rows, each with a position");
    span = span_bucket(span, model_.config().block_size);
    const c10::cuda::CUDAStreamGuard guard(c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream_));
    // The previous step's copy out of staging_ has finished: every step ends in a synchronize
    // (its logits or its sampled ids come back to the host).
    int64_t *host = staging_.data_ptr<int64_t>();
    std::copy(ids.begin(), ids.end(), host);
    std::copy(pos.begin(), pos.end(), host + inputs_.size(1));
    inputs_.copy_(staging_, /*non_blocking=*/true);
    auto it = graphs_.find({rows, span});
    if (it == graphs_.end()) it = graphs_.emplace(std::make_pair(rows, span), capture(rows, span)).first;
    it->second->graph.replay();
    return it->second->logits;
}

#else  // built without CUDA: no model runs on a GPU, so no session makes one

struct CapturedDecode::Captured {};

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
