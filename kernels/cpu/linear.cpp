// linear.cpp — see linear.h.
#include "cpu/linear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/linear_tile.h"
#include "cpu/tensor_element_type.h"
#include "cpu/threads.h"

namespace gpt::kernels {

namespace {

constexpr const char *LINEAR = "gpt_kernels::linear";
constexpr const char *LINEAR_INT8 = "gpt_kernels::linear_int8";
constexpr const char *LINEAR_INT8_Q8 = "gpt_kernels::linear_int8_q8";
constexpr const char *LINEAR_INT4 = "gpt_kernels::linear_int4";
constexpr const char *LINEAR_PANELS = "gpt_kernels::linear_panels";
constexpr const char *PACK_LINEAR_PANELS = "gpt_kernels::pack_linear_panels";
constexpr const char *LINEAR_INT8_Q8_PANELS = "gpt_kernels::linear_int8_q8_panels";
constexpr const char *PACK_LINEAR_Q8_PANELS = "gpt_kernels::pack_linear_q8_panels";
constexpr const char *LINEAR_INT4_PANELS = "gpt_kernels::linear_int4_panels";
constexpr const char *PACK_LINEAR_INT4_PANELS = "gpt_kernels::pack_linear_int4_panels";

// Throws std::invalid_argument "op: what" unless ok; `what` a string literal, or a callable that builds the message.
// Every call checks its arguments (~50 calls a decode step): a message built before it is known to be needed cost a
// heap allocation and a copy each time.
template <typename What>
void check(bool ok, const char *op, const What &what) {
    if (ok) return;
    if constexpr (std::is_invocable_v<What>)
        throw std::invalid_argument(std::string(op) + ": " + what());
    else
        throw std::invalid_argument(std::string(op) + ": " + what);
}

using TileFn = void (*)(const LinearTile &);
static_assert(LINEAR_TILE_ROWS == U4_BLOCK_ROWS, "a tile of u4 weights is one block");

TileFn tile_fn(Isa isa, const char *op) {
    check(cpu_runs(isa), op, [&] { return std::string("this CPU cannot run the ") + isa_name(isa) + " path"; });
    switch (isa) {
        case Isa::scalar: return linear_tile_scalar;
        case Isa::avx2: return linear_tile_avx2;
        case Isa::avx512: return linear_tile_avx512;
        case Isa::avx512_vnni: return linear_tile_avx512_vnni;
        case Isa::avx512_bf16: return linear_tile_avx512_bf16;
    }
    return linear_tile_scalar;
}

// `t`'s elements as fp32 in `buffer`, or `t`'s own memory when it is fp32 already (contiguous). A plain loop, not a
// torch op: a batch-1 step makes 49 linear calls, and each op's dispatch costs more than converting a few rows.
const float *as_floats(const at::Tensor &t, std::vector<float> &buffer) {
    if (t.scalar_type() == at::kFloat) return t.data_ptr<float>();
    const int64_t n = t.numel();
    if (buffer.size() < static_cast<size_t>(n))
        buffer.resize(static_cast<size_t>(n));  // grown, never zero-filled again
    // Through a local pointer: stores through the vector's own would make the compiler reload its data pointer after
    // each (they may alias it), and a bias of 3072 was converted one element at a time (1.5 % of an int4 step).
    float *out = buffer.data();
    if (t.scalar_type() == at::kBFloat16) {
        const auto *bits = static_cast<const uint16_t *>(t.data_ptr());
        for (int64_t i = 0; i < n; ++i) {
            const uint32_t wide = static_cast<uint32_t>(bits[i]) << 16;
            std::memcpy(out + i, &wide, sizeof(float));
        }
    } else {
        const auto *halves = t.data_ptr<at::Half>();
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(halves[i]);
    }
    return out;
}

// The buffers of a call on this thread, kept for its next call: a batch-1 decode step makes ~50 linear calls, and
// allocating, zero-filling and freeing their few KB each time (with the messages of checks that passed) made the
// calling thread's work before the tiles ~0.4 ms of GPT-2 124M's 4 ms int4 step, ~0.2 ms without. Whatever a call
// grew past KEPT_BYTES (a prefill's activations) is given back when it ends.
struct CallBuffers {
    static constexpr size_t KEPT_BYTES = size_t{1} << 20;
    std::vector<float> x, bias, scale;
    Q8Activations quantized;

    template <typename T>
    static void trim(std::vector<T> &v) {
        if (v.capacity() * sizeof(T) > KEPT_BYTES) std::vector<T>().swap(v);
    }
    void trim() {
        for (auto *v : {&x, &bias, &scale, &quantized.scale, &quantized.group_sum}) trim(*v);
        trim(quantized.q);
        trim(quantized.q_sum);
    }
};

// This thread's buffers for the length of one call (multiply is never re-entered on a thread: the tiles call no
// operator).
class ThreadBuffers {
public:
    ThreadBuffers() : buffers_(of_this_thread()) {}
    ~ThreadBuffers() { buffers_.trim(); }
    ThreadBuffers(const ThreadBuffers &) = delete;
    ThreadBuffers &operator=(const ThreadBuffers &) = delete;
    CallBuffers *operator->() { return &buffers_; }

private:
    static CallBuffers &of_this_thread() {
        thread_local CallBuffers buffers;
        return buffers;
    }
    CallBuffers &buffers_;
};

// A linear's weights as the tiles read them: `n` outputs of `k` inputs, in `data`'s rows (u4: blocks of
// U4_BLOCK_ROWS rows, two inputs a byte), with the scales of s8 rows or the (scale, zero) pairs of u4 groups.
struct Weights {
    ElementType type;
    const at::Tensor &data;
    int64_t n, k;
    const std::optional<at::Tensor> &scale;       // s8: (n,)
    const std::optional<at::Tensor> &scale_zero;  // u4: (blocks of 64 rows, groups, 64, 2)
    bool panels = false;                          // bf16 or s8 packed in panels (pack_linear_panels, _q8_panels)
    bool q8 = false;                              // s8: multiplied by x quantized (linear_int8_q8)
};

// The operators' one implementation: x · Wᵀ + bias, W the weights' values (s8 rows times their scales, u4 groups
// dequantised), in x's dtype.
at::Tensor multiply(const char *op, const at::Tensor &x, const Weights &weights, const std::optional<at::Tensor> &bias,
                    Isa isa) {
    const at::Tensor &weight = weights.data;
    const int64_t K = weights.k, N = weights.n;
    check(x.device().is_cpu() && weight.device().is_cpu(), op, "tensors must be on the CPU");
    check(K > 0 && N > 0, op, "weight must have at least one row and one column");
    check(x.dim() >= 1 && x.size(-1) == K, op,
          [&] { return "x's last size " + std::to_string(x.size(-1)) + " is not weight's K " + std::to_string(K); });
    check(weight.stride(1) == 1, op, "weight's rows must be contiguous");
    const ElementType out_type = element_type(x.scalar_type(), op);
    for (const auto &[vector, name] : {std::pair{&bias, "bias"}, std::pair{&weights.scale, "scale"}})
        if (*vector) {
            check((*vector)->dim() == 1 && (*vector)->size(0) == N, op,
                  [label = name] { return std::string(label) + " must be (N,)"; });
            element_type((*vector)->scalar_type(), op);
        }
    const TileFn fn = tile_fn(isa, op);

    const at::Tensor rows = x.reshape({-1, K}).contiguous();
    const int64_t M = rows.size(0);
    ThreadBuffers buffers;
    const float *x32 = as_floats(rows, buffers->x);  // read by every tile
    const auto *x_bf16 = rows.scalar_type() == at::kBFloat16 ? static_cast<const uint16_t *>(rows.data_ptr()) : nullptr;
    const at::Tensor bias_values = bias ? bias->contiguous() : at::Tensor();
    const float *bias32 = bias ? as_floats(bias_values, buffers->bias) : nullptr;
    const at::Tensor scale_values = weights.scale ? weights.scale->contiguous() : at::Tensor();
    const float *scale32 = weights.scale ? as_floats(scale_values, buffers->scale) : nullptr;
    const at::Tensor &pairs = weights.scale_zero ? *weights.scale_zero : at::Tensor();
    Q8Activations &quantized = buffers->quantized;  // u4 weights and q8 rows multiply x quantized, once for every tile
    if (pairs.defined() || weights.q8)
        quantize_activations(x32, M, K, pairs.defined() ? K / pairs.size(1) : K, quantized, isa);
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = N;
    at::Tensor out = at::empty(shape, x.options());  // the tiles store x's dtype: no fp32 result to convert after
    const int64_t tiles = (N + LINEAR_TILE_ROWS - 1) / LINEAR_TILE_ROWS;
    auto one_tile = [&](int64_t tile) {
        const int64_t first = tile * LINEAR_TILE_ROWS;
        LinearTile t{};
        t.type = weights.type;
        t.x = x32;
        t.x_stride = K;
        t.x_bf16 = x_bf16;
        t.w = static_cast<const char *>(weight.data_ptr()) + first * weight.stride(0) * weight.element_size();
        t.w_stride = weight.stride(0);
        t.panels = weights.panels;
        t.m = M;
        t.n = std::min(LINEAR_TILE_ROWS, N - first);
        t.k = K;
        t.scale = scale32 ? scale32 + first : nullptr;
        if (pairs.defined()) {
            // this tile's block: (groups, 64, 2)
            t.scale_zero = static_cast<const char *>(pairs.data_ptr()) + tile * pairs.stride(0) * pairs.element_size();
            t.scale_zero_type = element_type(pairs.scalar_type(), op);
            t.scale_zero_stride = pairs.stride(1);
            t.group = K / pairs.size(1);
            t.x_sum = quantized.group_sum.data();
        }
        if (pairs.defined() || weights.q8) {
            t.qx = quantized.q.data();
            t.qx_scale = quantized.scale.data();
            t.qx_sum = quantized.q_sum.data();
        }
        t.bias = bias32 ? bias32 + first : nullptr;
        t.out_type = out_type;
        t.out = static_cast<char *>(out.data_ptr()) + first * out.element_size();
        t.out_stride = N;
        fn(t);
    };
    for_each_item(tiles, one_tile);
    return out;
}

// linear_int4 and linear_int4_panels: the checks of int4 blocks and their pairs, then the one product.
at::Tensor linear_int4_blocks(const char *op, const at::Tensor &x, const at::Tensor &weight,
                              const at::Tensor &scale_zero, int64_t rows, const std::optional<at::Tensor> &bias,
                              Isa isa, bool panels) {
    check(weight.scalar_type() == at::kByte, op,
          [&] { return std::string("weight must be uint8, not ") + c10::toString(weight.scalar_type()); });
    check(weight.dim() == 2 && weight.is_contiguous() && weight.size(0) % U4_BLOCK_ROWS == 0, op,
          "weight must be contiguous (rows padded to a multiple of 64, K / 2) bytes");
    check(rows > 0 && rows <= weight.size(0) && weight.size(0) - rows < U4_BLOCK_ROWS, op, [&] {
        return "rows " + std::to_string(rows) + " do not fill weight's blocks of 64 (" +
               std::to_string(weight.size(0)) + " rows)";
    });
    const int64_t K = 2 * weight.size(1);
    check(scale_zero.dim() == 4 && scale_zero.size(0) * U4_BLOCK_ROWS == weight.size(0) &&
              scale_zero.size(2) == U4_BLOCK_ROWS && scale_zero.size(3) == 2 && scale_zero.is_contiguous(),
          op, "scale_zero must be contiguous (weight's blocks of 64 rows, groups, 64, 2)");
    element_type(scale_zero.scalar_type(), op);
    const int64_t groups = scale_zero.size(1);
    check(groups > 0 && K % groups == 0 && K / groups % Q8_BLOCK == 0, op, [&] {
        return std::to_string(groups) + " groups do not divide K " + std::to_string(K) + " into multiples of " +
               std::to_string(Q8_BLOCK);
    });
    Weights weights{ElementType::u4, weight, rows, K, std::nullopt, scale_zero};
    weights.panels = panels;
    return multiply(op, x, weights, bias, isa);
}

at::Tensor shape_of(const at::Tensor &x, const at::Tensor &weight) {
    std::vector<c10::SymInt> shape(x.sym_sizes().begin(), x.sym_sizes().end());
    shape.back() = weight.sym_size(0);
    return at::empty_symint(shape, x.options());
}

}  // namespace

at::Tensor linear(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &bias, Isa isa) {
    check(weight.dim() == 2, LINEAR, "weight must be (N, K)");
    const Weights weights{
        element_type(weight.scalar_type(), LINEAR), weight, weight.size(0), weight.size(1), std::nullopt, std::nullopt};
    return multiply(LINEAR, x, weights, bias, isa);
}

// (N, K) → (N / 16, 16, K / 2, 2) → (N / 16, K / 2, 16, 2): panel p's pair l holds output 16p + j's inputs 2l and
// 2l + 1 side by side at 2j and 2j + 1; an odd K's last input follows each panel's pairs, output by output.
at::Tensor pack_linear_panels(const at::Tensor &weight) {
    const char *op = PACK_LINEAR_PANELS;
    check(weight.scalar_type() == at::kBFloat16, op,
          [&] { return std::string("weight must be bfloat16, not ") + c10::toString(weight.scalar_type()); });
    check(weight.dim() == 2 && weight.size(0) > 0 && weight.size(0) % PANEL_ROWS == 0 && weight.size(1) > 0, op,
          [] { return "weight must be (N, K) with N a positive multiple of " + std::to_string(PANEL_ROWS); });
    const int64_t N = weight.size(0), K = weight.size(1), panels = N / PANEL_ROWS, pairs = K / 2;
    const at::Tensor paired = weight.narrow(1, 0, 2 * pairs)
                                  .reshape({panels, PANEL_ROWS, pairs, 2})
                                  .permute({0, 2, 1, 3})
                                  .reshape({panels, 2 * pairs * PANEL_ROWS});
    if (K % 2 == 0) return paired.view({N, K});
    const at::Tensor last = weight.narrow(1, K - 1, 1).reshape({panels, PANEL_ROWS});
    return at::cat({paired, last}, 1).view({N, K});
}

at::Tensor linear_panels(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &bias,
                         Isa isa) {
    const char *op = LINEAR_PANELS;
    check(weight.scalar_type() == at::kBFloat16, op,
          [&] { return std::string("weight must be bfloat16 panels, not ") + c10::toString(weight.scalar_type()); });
    check(weight.dim() == 2 && weight.is_contiguous() && weight.size(0) % PANEL_ROWS == 0, op,
          [] { return "weight must be contiguous (N, K) panels, N a multiple of " + std::to_string(PANEL_ROWS); });
    Weights weights{ElementType::bf16, weight, weight.size(0), weight.size(1), std::nullopt, std::nullopt};
    weights.panels = true;
    return multiply(op, x, weights, bias, isa);
}

at::Tensor linear_int8(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                       const std::optional<at::Tensor> &bias, Isa isa) {
    check(weight.scalar_type() == at::kChar, LINEAR_INT8,
          [&] { return std::string("weight must be int8, not ") + c10::toString(weight.scalar_type()); });
    check(weight.dim() == 2, LINEAR_INT8, "weight must be (N, K)");
    return multiply(LINEAR_INT8, x, {ElementType::s8, weight, weight.size(0), weight.size(1), scale, std::nullopt},
                    bias, isa);
}

at::Tensor linear_int8_q8(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                          const std::optional<at::Tensor> &bias, Isa isa) {
    const char *op = LINEAR_INT8_Q8;
    check(weight.scalar_type() == at::kChar, op,
          [&] { return std::string("weight must be int8, not ") + c10::toString(weight.scalar_type()); });
    check(weight.dim() == 2, op, "weight must be (N, K)");
    Weights weights{ElementType::s8, weight, weight.size(0), weight.size(1), scale, std::nullopt};
    weights.q8 = true;
    return multiply(op, x, weights, bias, isa);
}

// The whole panels' rows (N, K) → (N / 16, 16, K / 4, 4) → (N / 16, K / 4, 16, 4), each byte's top bit flipped
// (w + 128 as an unsigned byte); the rows past the last whole panel as they are.
at::Tensor pack_linear_q8_panels(const at::Tensor &weight) {
    const char *op = PACK_LINEAR_Q8_PANELS;
    check(weight.scalar_type() == at::kChar, op,
          [&] { return std::string("weight must be int8, not ") + c10::toString(weight.scalar_type()); });
    check(weight.dim() == 2 && weight.size(0) > 0 && weight.size(1) > 0 && weight.size(1) % Q8_BLOCK == 0, op,
          [] { return "weight must be (N, K) with K a positive multiple of " + std::to_string(Q8_BLOCK); });
    const int64_t N = weight.size(0), K = weight.size(1), whole = N / PANEL_ROWS * PANEL_ROWS;
    // One allocation, the packed copy, filled in place: tensor ops' temporaries were three weights' bytes at once (a
    // load's peak memory: GPT-2's 39 MB head).
    const at::Tensor rows = weight.contiguous();
    at::Tensor packed = at::empty({N, K}, weight.options().dtype(at::kByte));
    const auto *from = static_cast<const uint8_t *>(rows.data_ptr());
    auto *to = static_cast<uint8_t *>(packed.data_ptr());
    at::parallel_for(0, whole / PANEL_ROWS, 1, [&](int64_t first, int64_t last) {
        for (int64_t p = first; p < last; ++p)
            for (int64_t j = 0; j < PANEL_ROWS; ++j)
                for (int64_t l = 0; l < K; ++l)
                    to[p * PANEL_ROWS * K + l / 4 * 64 + j * 4 + l % 4] = from[(p * PANEL_ROWS + j) * K + l] ^ 0x80;
    });
    std::memcpy(to + whole * K, from + whole * K, static_cast<size_t>((N - whole) * K));
    return packed;
}

at::Tensor linear_int8_q8_panels(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                                 const std::optional<at::Tensor> &bias, Isa isa) {
    const char *op = LINEAR_INT8_Q8_PANELS;
    check(weight.scalar_type() == at::kByte, op,
          [&] { return std::string("weight must be uint8 q8 panels, not ") + c10::toString(weight.scalar_type()); });
    check(weight.dim() == 2 && weight.is_contiguous() && weight.size(1) % Q8_BLOCK == 0, op,
          [] { return "weight must be contiguous (N, K) q8 panels, K a multiple of " + std::to_string(Q8_BLOCK); });
    Weights weights{ElementType::s8, weight, weight.size(0), weight.size(1), scale, std::nullopt};
    weights.panels = true;
    weights.q8 = true;
    return multiply(op, x, weights, bias, isa);
}

// (Npad, K) q's → (Npad / 16, 16, K / 8, 2, 4) → the low and high four bits of (Npad / 16, K / 8, 16, 4) bytes.
at::Tensor pack_linear_int4_panels(const at::Tensor &weight) {
    const char *op = PACK_LINEAR_INT4_PANELS;
    check(weight.scalar_type() == at::kByte, op,
          [&] { return std::string("weight must be uint8, not ") + c10::toString(weight.scalar_type()); });
    check(weight.dim() == 2 && weight.size(0) > 0 && weight.size(0) % U4_BLOCK_ROWS == 0 && weight.size(1) > 0 &&
              weight.size(1) * 2 % Q8_BLOCK == 0,
          op, "weight must be (rows padded to a multiple of 64, K / 2) bytes with K a multiple of 32");
    const int64_t N = weight.size(0), K = weight.size(1) * 2, half = U4_BLOCK_ROWS / 2;
    // One allocation, filled in place (as pack_linear_q8_panels): row r's q of input l is in the block's byte
    // (l, r % 32), low four bits for r % 64 < 32.
    const at::Tensor stored = weight.contiguous();
    at::Tensor packed = at::empty({N, K / 2}, weight.options());
    const auto *from = static_cast<const uint8_t *>(stored.data_ptr());
    auto *to = static_cast<uint8_t *>(packed.data_ptr());
    const auto q_of = [&](int64_t r, int64_t l) {
        const uint8_t byte = from[r / U4_BLOCK_ROWS * U4_BLOCK_ROWS * K / 2 + l * half + r % half];
        return r % U4_BLOCK_ROWS < half ? byte & 15 : byte >> 4;
    };
    at::parallel_for(0, N / PANEL_ROWS, 1, [&](int64_t first, int64_t last) {
        for (int64_t p = first; p < last; ++p)
            for (int64_t step = 0; step < K / 8; ++step)
                for (int64_t j = 0; j < PANEL_ROWS; ++j)
                    for (int64_t i = 0; i < 4; ++i) {
                        const int64_t r = p * PANEL_ROWS + j, l = 8 * step + i;
                        to[p * PANEL_ROWS * K / 2 + step * 64 + j * 4 + i] =
                            static_cast<uint8_t>(q_of(r, l) | q_of(r, l + 4) << 4);
                    }
    });
    return packed;
}

at::Tensor linear_int4(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale_zero, int64_t rows,
                       const std::optional<at::Tensor> &bias, Isa isa) {
    return linear_int4_blocks(LINEAR_INT4, x, weight, scale_zero, rows, bias, isa, false);
}

at::Tensor linear_int4_panels(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale_zero, int64_t rows,
                              const std::optional<at::Tensor> &bias, Isa isa) {
    return linear_int4_blocks(LINEAR_INT4_PANELS, x, weight, scale_zero, rows, bias, isa, true);
}

at::Tensor linear_cpu(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &bias) {
    return linear(x, weight, bias, active_isa());
}

at::Tensor linear_meta(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &) {
    return shape_of(x, weight);
}

at::Tensor linear_panels_cpu(const at::Tensor &x, const at::Tensor &weight, const std::optional<at::Tensor> &bias) {
    return linear_panels(x, weight, bias, active_isa());
}

at::Tensor linear_int8_cpu(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                           const std::optional<at::Tensor> &bias) {
    return linear_int8(x, weight, scale, bias, active_isa());
}

at::Tensor linear_int8_meta(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &,
                            const std::optional<at::Tensor> &) {
    return shape_of(x, weight);
}

at::Tensor linear_int8_q8_cpu(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                              const std::optional<at::Tensor> &bias) {
    return linear_int8_q8(x, weight, scale, bias, active_isa());
}

at::Tensor linear_int8_q8_panels_cpu(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale,
                                     const std::optional<at::Tensor> &bias) {
    return linear_int8_q8_panels(x, weight, scale, bias, active_isa());
}

at::Tensor linear_int4_cpu(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale_zero, int64_t rows,
                           const std::optional<at::Tensor> &bias) {
    return linear_int4(x, weight, scale_zero, rows, bias, active_isa());
}

at::Tensor linear_int4_panels_cpu(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &scale_zero,
                                  int64_t rows, const std::optional<at::Tensor> &bias) {
    return linear_int4_panels(x, weight, scale_zero, rows, bias, active_isa());
}

at::Tensor linear_int4_meta(const at::Tensor &x, const at::Tensor &, const at::Tensor &, int64_t rows,
                            const std::optional<at::Tensor> &) {
    std::vector<c10::SymInt> shape(x.sym_sizes().begin(), x.sym_sizes().end());
    shape.back() = rows;
    return at::empty_symint(shape, x.options());
}

}  // namespace gpt::kernels
