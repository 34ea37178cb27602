// grad_buckets.h — the trainer's gradients as views into a few flat buffers
// ("buckets") of about bucket_bytes each, so that a distributed step all-reduces
// whole buckets without packing or unpacking. Each view starts 64-byte aligned,
// like a tensor of its own, so the compiled graphs see the layout they expect.
#pragma once

#include <ATen/Tensor.h>

#include <vector>

namespace gpt {

class GradBuckets {
public:
    // One zeroed gradient per tensor of `like` (same shape, dtype, device).
    GradBuckets(const std::vector<at::Tensor> &like, int64_t bucket_bytes);

    const std::vector<at::Tensor> &grads() const { return grads_; }
    size_t count() const { return buckets_.size(); }
    const at::Tensor &bucket(size_t b) const { return buckets_[b]; }
    // grads()[first(b)] .. grads()[end(b) - 1] live in bucket b.
    size_t first(size_t b) const { return bounds_[b]; }
    size_t end(size_t b) const { return bounds_[b + 1]; }

private:
    std::vector<at::Tensor> grads_;
    std::vector<at::Tensor> buckets_;  // 1-D, dtype of the gradients
    std::vector<size_t> bounds_;       // count() + 1 indices into grads_
};

}  // namespace gpt
