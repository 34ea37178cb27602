// decode_attention.cpp — the decode step's attention on the CPU: argument checks, the split into chunks over the
// calling thread's OpenMP threads, and the exact merge of the chunks' softmax sums.
#include "cpu/decode_attention.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "cpu/attention_chunk.h"
#include "cpu/kv_row_q8.h"
#include "cpu/tensor_element_type.h"

namespace gpt::kernels {

namespace {

void check(bool ok, const std::string &what) {
    if (!ok) throw std::invalid_argument("gpt_kernels::decode_attention: " + what);
}

using ChunkFn = void (*)(const AttentionChunk &);

ChunkFn chunk_fn(Isa isa) {
    if (!cpu_runs(isa))
        throw std::invalid_argument(std::string("gpt_kernels::decode_attention: this CPU cannot run the ") +
                                    isa_name(isa) + " path");
    switch (isa) {
        case Isa::scalar: return attend_chunk_scalar;
        case Isa::avx2: return attend_chunk_avx2;
        case Isa::avx512:
        case Isa::avx512_vnni:
        case Isa::avx512_bf16: return attend_chunk_avx512;  // no integer or bf16 dot products in attention
    }
    return attend_chunk_scalar;
}

// The D elements of row (b, h) of a (B, H, 1, D) tensor start here, t.stride(3) elements apart.
const char *token_row(const at::Tensor &t, int64_t b, int64_t h) {
    return static_cast<const char *>(t.data_ptr()) +
           (b * t.stride(0) + h * t.stride(1)) * static_cast<int64_t>(t.element_size());
}

// A row's D elements, `stride` elements apart, into D contiguous ones: one copy where they are contiguous.
void copy_row(const char *from, int64_t stride, int64_t d, int64_t element, char *to) {
    if (stride == 1) {
        std::memcpy(to, from, static_cast<size_t>(d * element));
        return;
    }
    for (int64_t i = 0; i < d; ++i)
        std::memcpy(to + i * element, from + i * stride * element, static_cast<size_t>(element));
}

template <typename T>
void scale_row(const char *from, int64_t stride, int64_t d, float scale, float *to) {
    const auto *x = reinterpret_cast<const T *>(from);
    for (int64_t i = 0; i < d; ++i) to[i] = static_cast<float>(x[i * stride]) * scale;
}

// A row's D elements as fp32, times `scale`.
void scaled_row(const char *from, int64_t stride, ElementType type, int64_t d, float scale, float *to) {
    switch (type) {
        case ElementType::f32: return scale_row<float>(from, stride, d, scale, to);
        case ElementType::bf16: return scale_row<c10::BFloat16>(from, stride, d, scale, to);
        case ElementType::f16: return scale_row<c10::Half>(from, stride, d, scale, to);
        case ElementType::s8:
        case ElementType::u4: return;  // never a cache's: element_type() refuses integer tensors
    }
}

template <typename T>
void store_row(const float *from, int64_t d, float divisor, char *to) {
    auto *y = reinterpret_cast<T *>(to);
    for (int64_t i = 0; i < d; ++i) y[i] = T(from[i] / divisor);
}

// D fp32 values divided by `divisor`, stored contiguous in `type`.
void stored_row(const float *from, ElementType type, int64_t d, float divisor, char *to) {
    switch (type) {
        case ElementType::f32: return store_row<float>(from, d, divisor, to);
        case ElementType::bf16: return store_row<c10::BFloat16>(from, d, divisor, to);
        case ElementType::f16: return store_row<c10::Half>(from, d, divisor, to);
        case ElementType::s8:
        case ElementType::u4: return;  // never a cache's: element_type() refuses integer tensors
    }
}

}  // namespace

namespace {

// The multiply-adds of merges worth a thread of their own (see the merge).
constexpr int64_t MERGE_WORK_PER_THREAD = 16384;

// Both operators: token b's cache row is seq_in[b] where seq_in is defined, else b.
at::Tensor attend_tokens(const at::Tensor &q_in, const at::Tensor &k, const at::Tensor &v, at::Tensor &k_cache,
                         at::Tensor &v_cache, const at::Tensor &pos_in, const at::Tensor &seq_in, double scale,
                         Isa isa) {
    check(q_in.dim() == 4 && k.dim() == 4 && v.dim() == 4 && k_cache.dim() == 4 && v_cache.dim() == 4,
          "q, k, v and the caches must be (B, H, T, D)");
    const int64_t B = q_in.size(0), H = q_in.size(1), D = q_in.size(3), S = k_cache.size(2);
    const int64_t rows = k_cache.size(0);
    check(q_in.size(2) == 1 && k.sizes() == q_in.sizes() && v.sizes() == q_in.sizes(),
          "q, k and v must be (B, H, 1, D): one new token a row");
    const at::ScalarType dtype = q_in.scalar_type();
    check(k.scalar_type() == dtype && v.scalar_type() == dtype, "q, k and v must share a dtype");
    // A cache in q's dtype holds D elements a position; an int8 one D int8 values and their scale (kv_row_q8.h).
    const bool q8_cache = k_cache.scalar_type() == at::kChar;
    const int64_t position_size = q8_cache ? D + KV_Q8_SCALE_BYTES : D;
    check(k_cache.scalar_type() == v_cache.scalar_type() && (q8_cache || k_cache.scalar_type() == dtype),
          "the caches must be in q's dtype, or both int8");
    check(k_cache.sizes() == v_cache.sizes() && k_cache.size(1) == H && k_cache.size(3) == position_size,
          q8_cache ? "int8 caches must be (rows, H, S, D + 4) with q's H and D"
                   : "the caches must be (rows, H, S, D) with q's H and D");
    check(seq_in.defined() || rows == B, "the caches must have q's B rows");
    check(k_cache.stride(3) == 1 && v_cache.stride(3) == 1, "each cache position's D elements must be contiguous");
    for (const at::Tensor *t : std::initializer_list<const at::Tensor *>{&q_in, &k, &v, &k_cache, &v_cache, &pos_in})
        check(t->device().is_cpu(), "a CPU kernel takes CPU tensors");
    check(pos_in.dim() == 1 && pos_in.size(0) == B && pos_in.scalar_type() == at::kLong, "pos must be (B,) int64");
    const ElementType type = element_type(dtype, "gpt_kernels::decode_attention");
    const ElementType cache_type = q8_cache ? ElementType::s8 : type;
    const ChunkFn attend_chunk = chunk_fn(isa);
    const at::Tensor pos = pos_in.contiguous();
    const int64_t *pos_data = pos.data_ptr<int64_t>();
    for (int64_t b = 0; b < B; ++b)
        check(pos_data[b] >= 0 && pos_data[b] < S, "pos[" + std::to_string(b) + "] = " + std::to_string(pos_data[b]) +
                                                       " is outside the cache's " + std::to_string(S) + " positions");
    std::vector<int64_t> row_of_token(static_cast<size_t>(B));
    if (seq_in.defined()) {
        check(seq_in.device().is_cpu() && seq_in.dim() == 1 && seq_in.size(0) == B && seq_in.scalar_type() == at::kLong,
              "seq must be (B,) int64 on the CPU");
        const at::Tensor seq = seq_in.contiguous();
        std::copy_n(seq.data_ptr<int64_t>(), B, row_of_token.begin());
        std::set<std::pair<int64_t, int64_t>> written;
        for (int64_t b = 0; b < B; ++b) {
            const int64_t row = row_of_token[static_cast<size_t>(b)];
            check(row >= 0 && row < rows, "seq[" + std::to_string(b) + "] = " + std::to_string(row) +
                                              " is not one of the caches' " + std::to_string(rows) + " rows");
            check(written.emplace(row, pos_data[b]).second,
                  "two tokens go to position " + std::to_string(pos_data[b]) + " of cache row " + std::to_string(row));
        }
    } else {
        std::iota(row_of_token.begin(), row_of_token.end(), int64_t{0});
    }
    const int64_t *row_of = row_of_token.data();

    // Every new key and value into the caches at its row's position, before any query attends (tokens of one
    // sequence then see their earlier ones), and the queries in fp32, scaled once: plain row copies over (b, h),
    // where torch's indexing and conversions cost more than the copies at one token a row.
    const int64_t element = static_cast<int64_t>(q_in.element_size());
    const int64_t cache_element = static_cast<int64_t>(k_cache.element_size());
    auto *k_data = static_cast<char *>(k_cache.data_ptr());
    auto *v_data = static_cast<char *>(v_cache.data_ptr());
    std::vector<float> q_scaled(static_cast<size_t>(B * H * D));
    std::vector<float> widened(q8_cache ? static_cast<size_t>(D) : 0);
    const auto store = [&](const at::Tensor &t, int64_t b, int64_t h, char *to) {
        if (!q8_cache) return copy_row(token_row(t, b, h), t.stride(3), D, element, to);
        scaled_row(token_row(t, b, h), t.stride(3), type, D, 1.0f, widened.data());
        store_kv_q8_row(widened.data(), D, to);
    };
    for (int64_t b = 0; b < B; ++b) {
        const int64_t r = row_of[b];
        for (int64_t h = 0; h < H; ++h) {
            store(k, b, h,
                  k_data + (r * k_cache.stride(0) + h * k_cache.stride(1) + pos_data[b] * k_cache.stride(2)) *
                               cache_element);
            store(v, b, h,
                  v_data + (r * v_cache.stride(0) + h * v_cache.stride(1) + pos_data[b] * v_cache.stride(2)) *
                               cache_element);
            scaled_row(token_row(q_in, b, h), q_in.stride(3), type, D, static_cast<float>(scale),
                       q_scaled.data() + (b * H + h) * D);
        }
    }
    const int64_t chunks = (S + KV_CHUNK - 1) / KV_CHUNK;
    // Per (b, h, chunk): the chunk's weighted values (D), then its maximum and sum; chunks past pos[b] stay empty.
    const int64_t record = D + 2;
    std::vector<float> partial(static_cast<size_t>(B * H * chunks * record));
    const float *q_data = q_scaled.data();

    at::parallel_for(0, B * H * chunks, 1, [&](int64_t begin, int64_t end) {
        std::vector<float> scores(KV_CHUNK);
        for (int64_t item = begin; item < end; ++item) {
            const int64_t c = item % chunks, bh = item / chunks, b = bh / H, h = bh % H;
            const int64_t first = c * KV_CHUNK;
            float *out = partial.data() + item * record;
            if (first > pos_data[b]) {  // unseen: no weight in the merge
                out[D] = -std::numeric_limits<float>::infinity();
                continue;
            }
            AttentionChunk chunk{};
            chunk.type = cache_type;
            chunk.q = q_data + bh * D;
            chunk.k = k_data + (row_of[b] * k_cache.stride(0) + h * k_cache.stride(1) + first * k_cache.stride(2)) *
                                   cache_element;
            chunk.v = v_data + (row_of[b] * v_cache.stride(0) + h * v_cache.stride(1) + first * v_cache.stride(2)) *
                                   cache_element;
            chunk.k_stride = k_cache.stride(2);
            chunk.v_stride = v_cache.stride(2);
            chunk.positions = std::min(KV_CHUNK, pos_data[b] + 1 - first);
            chunk.d = D;
            chunk.scores = scores.data();
            chunk.acc = out;
            chunk.max = out + D;
            chunk.sum = out + D + 1;
            attend_chunk(chunk);
        }
    });

    // Merge each (b, h)'s chunks: Σ_c acc_c·e^(max_c − M) / Σ_c sum_c·e^(max_c − M), M the largest max_c.
    at::Tensor result = at::empty({B, H, 1, D}, q_in.options().memory_format(at::MemoryFormat::Contiguous));
    auto *result_data = static_cast<char *>(result.data_ptr());
    // A merge is a few multiply-adds a chunk and dimension: a batch-1 step's 12 heads' merges take less than a
    // parallel region's fork and join, and run on the calling thread (at::parallel_for does so when the items
    // are no more than the grain).
    const int64_t merge_grain = std::max<int64_t>(1, MERGE_WORK_PER_THREAD / (chunks * D));
    at::parallel_for(0, B * H, merge_grain, [&](int64_t begin, int64_t end) {
        std::vector<float> out(static_cast<size_t>(D));
        for (int64_t bh = begin; bh < end; ++bh) {
            const float *first = partial.data() + bh * chunks * record;
            float top = -std::numeric_limits<float>::infinity();
            for (int64_t c = 0; c < chunks; ++c) top = std::fmax(top, first[c * record + D]);
            std::fill(out.begin(), out.end(), 0.0f);
            float total = 0.0f;
            for (int64_t c = 0; c < chunks; ++c) {
                const float *part = first + c * record;
                if (part[D] == -std::numeric_limits<float>::infinity()) continue;
                const float weight = std::exp(part[D] - top);
                total += part[D + 1] * weight;
                for (int64_t i = 0; i < D; ++i) out[static_cast<size_t>(i)] += part[i] * weight;
            }
            stored_row(out.data(), type, D, total, result_data + bh * D * element);
        }
    });
    return result;
}

}  // namespace

at::Tensor decode_attention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, at::Tensor &k_cache,
                            at::Tensor &v_cache, const at::Tensor &pos, double scale, Isa isa) {
    return attend_tokens(q, k, v, k_cache, v_cache, pos, at::Tensor(), scale, isa);
}

at::Tensor decode_attention_rows(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, at::Tensor &k_cache,
                                 at::Tensor &v_cache, const at::Tensor &pos, const at::Tensor &seq, double scale,
                                 Isa isa) {
    check(seq.defined(), "seq must be a tensor");
    return attend_tokens(q, k, v, k_cache, v_cache, pos, seq, scale, isa);
}

at::Tensor decode_attention_cpu(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, at::Tensor &k_cache,
                                at::Tensor &v_cache, const at::Tensor &pos, double scale) {
    return decode_attention(q, k, v, k_cache, v_cache, pos, scale, active_isa());
}

at::Tensor decode_attention_rows_cpu(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, at::Tensor &k_cache,
                                     at::Tensor &v_cache, const at::Tensor &pos, const at::Tensor &seq, double scale) {
    return decode_attention_rows(q, k, v, k_cache, v_cache, pos, seq, scale, active_isa());
}

at::Tensor decode_attention_rows_meta(const at::Tensor &q, const at::Tensor & /*k*/, const at::Tensor & /*v*/,
                                      at::Tensor & /*k_cache*/, at::Tensor & /*v_cache*/, const at::Tensor & /*pos*/,
                                      const at::Tensor & /*seq*/, double /*scale*/) {
    return at::empty_symint(q.sym_sizes(), q.options());
}

at::Tensor decode_attention_meta(const at::Tensor &q, const at::Tensor & /*k*/, const at::Tensor & /*v*/,
                                 at::Tensor & /*k_cache*/, at::Tensor & /*v_cache*/, const at::Tensor & /*pos*/,
                                 double /*scale*/) {
    return at::empty_symint(q.sym_sizes(), q.options());
}

}  // namespace gpt::kernels
