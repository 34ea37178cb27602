// captured_decode.h — a session's decode steps as CUDA graphs. A GPT-2 decode step is some 150
// small kernels, each launched from the host; launching dominates the step on a GPU. Each step
// shape — rows stepped and cache positions read, rounded up to a power of two — is captured
// once into a CUDA graph over the session's own input buffers and KV cache, then replayed:
// one launch per step. Positions past a row's own are masked in the graphs, so reading a
// rounded-up span gives the logits of the exact one.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "exec/model.h"

namespace gpt {

class CapturedDecode {
public:
    // `kv`: the session's cache, whose address the graphs keep; `stream`: the session's own CUDA
    // stream, where every capture and replay runs. Both outlive this object.
    CapturedDecode(const Model &model, const at::Tensor &kv, c10::Stream stream);
    ~CapturedDecode();
    CapturedDecode(const CapturedDecode &) = delete;
    CapturedDecode &operator=(const CapturedDecode &) = delete;

    struct Step {
        at::Tensor logits;  // (rows, padded_vocab) on the GPU
        at::Tensor greedy;  // greedy_choice of the logits (device_sampling.h), computed in the same graph
    };
    // Model::decode of ids (rows) at positions `pos` (rows) over the cache's first rows, reading
    // at least `span` positions. The tensors are the graph's own memory: valid until the next step.
    // The first step of a shape captures it; a capture that fails is undone, logged, and turns the
    // model's CUDA graphs off: then the tensors returned are undefined, and the caller runs the
    // step itself (short of memory, the capture is undone and c10::OutOfMemoryError thrown: a
    // later step tries again).
    Step step(const std::vector<int64_t> &ids, const std::vector<int64_t> &pos, int64_t span);

    // The cache positions a step of `span` reads when captured: a power of two from 16 up, within [2, block_size].
    static int64_t span_bucket(int64_t span, int64_t block_size);
    // Shapes captured so far.
    size_t captured() const { return graphs_.size(); }

private:
    struct Captured;
    std::unique_ptr<Captured> capture(int64_t rows, int64_t span);

    const Model &model_;
    at::Tensor kv_;
    c10::Stream stream_;
    at::Tensor inputs_;            // (2, n_seq padded) int64 on the GPU: the ids and positions every graph reads
    c10::MempoolId_t pool_{0, 0};  // the memory pool the session's graphs share (0: the first capture makes it)
    std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Captured>> graphs_;  // by (rows, span)
};

}  // namespace gpt
