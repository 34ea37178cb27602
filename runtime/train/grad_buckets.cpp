// grad_buckets.cpp — see grad_buckets.h.
#include "train/grad_buckets.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/zeros.h>

namespace gpt {

namespace {

constexpr int64_t kAlignBytes = 64;

int64_t aligned_numel(const at::Tensor &t) {
    const int64_t per_align = kAlignBytes / static_cast<int64_t>(t.element_size());
    return (t.numel() + per_align - 1) / per_align * per_align;
}

}  // namespace

GradBuckets::GradBuckets(const std::vector<at::Tensor> &like, int64_t bucket_bytes) {
    bounds_.push_back(0);
    size_t begin = 0;
    while (begin < like.size()) {
        // Fill one bucket: at least one tensor, then more while under bucket_bytes
        // and of the same dtype (a bucket is one flat tensor).
        size_t stop = begin;
        int64_t numel = 0;
        while (stop < like.size() && like[stop].scalar_type() == like[begin].scalar_type() &&
               (stop == begin || (numel + aligned_numel(like[stop])) * like[stop].element_size() <= bucket_bytes))
            numel += aligned_numel(like[stop++]);
        at::Tensor flat = at::zeros({numel}, like[begin].options());
        int64_t offset = 0;
        for (size_t i = begin; i < stop; ++i) {
            grads_.push_back(flat.narrow(0, offset, like[i].numel()).view(like[i].sizes()));
            offset += aligned_numel(like[i]);
        }
        buckets_.push_back(flat);
        bounds_.push_back(stop);
        begin = stop;
    }
}

}  // namespace gpt
