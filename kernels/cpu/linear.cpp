// linear.cpp — see linear.h.
#include "cpu/linear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/linear_tile.h"
#include "cpu/tensor_element_type.h"

namespace gpt::kernels {

namespace {

constexpr const char *OP = "gpt_kernels::linear";

void check(bool ok, const std::string &what) {
    if (!ok) throw std::invalid_argument(std::string(OP) + ": " + what);
}

using TileFn = void (*)(const LinearTile &);

TileFn tile_fn(Isa isa) {
    check(cpu_runs(isa), std::string("this CPU cannot run the ") + isa_name(isa) + " path");
    switch (isa) {
        case Isa::scalar: return linear_tile_scalar;
        case Isa::avx2: return linear_tile_avx2;
        case Isa::avx512: return linear_tile_avx512;
    }
    return linear_tile_scalar;
}

}  // namespace

at::Tensor linear(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &bias, Isa isa) {
    check(x.device().is_cpu() && weight.device().is_cpu(), "tensors must be on the CPU");
    check(x.dim() >= 1 && weight.dim() == 2, "x must be (..., K) and weight (N, K)");
    const int64_t K = weight.size(1), N = weight.size(0);
    check(K > 0 && N > 0, "weight must have at least one row and one column");
    check(x.size(-1) == K, "x's last size " + std::to_string(x.size(-1)) + " is not weight's K " + std::to_string(K));
    check(weight.stride(1) == 1, "weight's rows must be contiguous");
    const ElementType type = element_type(weight.scalar_type(), OP);
    element_type(x.scalar_type(), OP);
    if (bias) check(bias->dim() == 1 && bias->size(0) == N, "bias must be (N,)");
    const TileFn fn = tile_fn(isa);

    const at::Tensor rows = x.reshape({-1, K}).to(at::kFloat).contiguous();  // fp32, read by every tile
    const int64_t M = rows.size(0);
    at::Tensor out = at::empty({M, N}, x.options().dtype(at::kFloat));
    const int64_t tiles = (N + LINEAR_TILE_ROWS - 1) / LINEAR_TILE_ROWS;
    at::parallel_for(0, tiles, 1, [&](int64_t begin, int64_t end) {
        for (int64_t tile = begin; tile < end; ++tile) {
            const int64_t first = tile * LINEAR_TILE_ROWS;
            LinearTile t{};
            t.type = type;
            t.x = rows.data_ptr<float>();
            t.x_stride = K;
            t.w = static_cast<const char *>(weight.data_ptr()) + first * weight.stride(0) * weight.element_size();
            t.w_stride = weight.stride(0);
            t.m = M;
            t.n = std::min(LINEAR_TILE_ROWS, N - first);
            t.k = K;
            t.out = out.data_ptr<float>() + first;
            t.out_stride = N;
            fn(t);
        }
    });
    if (bias) out.add_(bias->to(at::kFloat));
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = N;
    return out.to(x.scalar_type()).view(shape);
}

at::Tensor linear_cpu(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &bias) {
    return linear(x, weight, bias, active_isa());
}

at::Tensor linear_meta(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &) {
    std::vector<c10::SymInt> shape(x.sym_sizes().begin(), x.sym_sizes().end());
    shape.back() = weight.sym_size(0);
    return at::empty_symint(shape, x.options());
}

}  // namespace gpt::kernels
