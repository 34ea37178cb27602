#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/mman.h>
#include <immintrin.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <functional>
#include "cpu/linear.h"
namespace gpt::kernels { extern int experiment_prefetch; extern int experiment_static; }
using namespace gpt::kernels;
static at::Tensor huge(std::vector<int64_t> shape) {
    size_t bytes = 2; for (auto s : shape) bytes *= s;
    size_t H = 2 << 20, len = (bytes + H - 1) / H * H + H;
    char *p = (char *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *a = (char *)(((uintptr_t)p + H - 1) / H * H);
    madvise(a, bytes / H * H, MADV_HUGEPAGE);
    auto t = at::from_blob(a, shape, at::kBFloat16);
    t.copy_(at::randn(shape) * 0.02);
    return t;
}
volatile int64_t sink = 0;
static void rd(const at::Tensor &w) {
    const int64_t n = w.numel() / 16; const __m256i *p = (const __m256i *)w.data_ptr();
    std::atomic<int64_t> acc{0};
    at::parallel_for(0, n, 2048, [&](int64_t b, int64_t e) {
        __m256i a = _mm256_setzero_si256(), c = _mm256_setzero_si256();
        for (int64_t i = b; i + 1 < e; i += 2) { a = _mm256_add_epi32(a, _mm256_loadu_si256(p + i)); c = _mm256_add_epi32(c, _mm256_loadu_si256(p + i + 1)); }
        a = _mm256_add_epi32(a, c);
        acc += _mm256_extract_epi32(a, 0);
    });
    sink = sink + acc;
}
int main(int argc, char **argv) {
    at::set_num_threads(argc > 1 ? atoi(argv[1]) : 2);
    struct L { at::Tensor w, p, b; };
    std::vector<L> ls;
    for (int l = 0; l < 12; ++l)
        for (auto [n, k] : {std::pair{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}}) {
            auto w = huge({n, k}); auto p = huge({n, k}); p.copy_(pack_linear_panels(w));
            ls.push_back({w, p, at::zeros({n}, at::kBFloat16)});
        }
    at::Tensor head = huge({50304, 768});
    at::Tensor x768 = at::randn({1, 768}).to(at::kBFloat16), x3072 = at::randn({1, 3072}).to(at::kBFloat16);
    double blocks_mb = 0; for (auto &l : ls) blocks_mb += l.w.nbytes() / 1e6;
    double head_mb = head.nbytes() / 1e6;
    struct V { const char *name; double mb; std::function<void()> f; };
    std::vector<V> vs = {
        {"panels dyn", blocks_mb, [&] { experiment_prefetch = 0; experiment_static = 0; for (auto &l : ls) linear_panels(l.w.size(1) == 768 ? x768 : x3072, l.p, l.b, Isa::avx2); }},
        {"panels static", blocks_mb, [&] { experiment_prefetch = 0; experiment_static = 1; for (auto &l : ls) linear_panels(l.w.size(1) == 768 ? x768 : x3072, l.p, l.b, Isa::avx2); }},
        {"panels steal", blocks_mb, [&] { experiment_prefetch = 0; experiment_static = 2; for (auto &l : ls) linear_panels(l.w.size(1) == 768 ? x768 : x3072, l.p, l.b, Isa::avx2); }},
        {"pf8K dyn", blocks_mb, [&] { experiment_prefetch = 8193; experiment_static = 0; for (auto &l : ls) linear_panels(l.w.size(1) == 768 ? x768 : x3072, l.p, l.b, Isa::avx2); }},
        {"pf8K static", blocks_mb, [&] { experiment_prefetch = 8193; experiment_static = 1; for (auto &l : ls) linear_panels(l.w.size(1) == 768 ? x768 : x3072, l.p, l.b, Isa::avx2); }},
        {"pf8K steal", blocks_mb, [&] { experiment_prefetch = 8193; experiment_static = 2; for (auto &l : ls) linear_panels(l.w.size(1) == 768 ? x768 : x3072, l.p, l.b, Isa::avx2); }},
        {"pf4K steal", blocks_mb, [&] { experiment_prefetch = 4097; experiment_static = 2; for (auto &l : ls) linear_panels(l.w.size(1) == 768 ? x768 : x3072, l.p, l.b, Isa::avx2); }},
        {"row steal", blocks_mb, [&] { experiment_prefetch = 0; experiment_static = 2; for (auto &l : ls) linear(l.w.size(1) == 768 ? x768 : x3072, l.w, l.b, Isa::avx2); }},
        {"row pf8K steal", blocks_mb, [&] { experiment_prefetch = 8192; experiment_static = 2; for (auto &l : ls) linear(l.w.size(1) == 768 ? x768 : x3072, l.w, l.b, Isa::avx2); }},
        {"blocks read", blocks_mb, [&] { for (auto &l : ls) rd(l.w); }},
        {"head dyn", head_mb, [&] { experiment_prefetch = 0; experiment_static = 0; linear(x768, head, std::nullopt, Isa::avx2); }},
        {"head steal", head_mb, [&] { experiment_prefetch = 0; experiment_static = 2; linear(x768, head, std::nullopt, Isa::avx2); }},
        {"head pf8K steal", head_mb, [&] { experiment_prefetch = 8192; experiment_static = 2; linear(x768, head, std::nullopt, Isa::avx2); }},
        {"head pf16K steal", head_mb, [&] { experiment_prefetch = 16384; experiment_static = 2; linear(x768, head, std::nullopt, Isa::avx2); }},
        {"head read", head_mb, [&] { rd(head); }},
    };
    std::vector<std::vector<double>> ms(vs.size());
    for (int it = 0; it < 200; ++it)
        for (size_t v = 0; v < vs.size(); ++v) {
            auto t0 = std::chrono::steady_clock::now();
            vs[v].f();
            ms[v].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
    for (size_t v = 0; v < vs.size(); ++v) {
        auto &m = ms[v]; std::sort(m.begin(), m.end());
        printf("%-18s median %.3f ms p10 %.3f  GB/s %.1f (p10 %.1f)\n", vs[v].name, m[m.size() / 2], m[m.size() / 10], vs[v].mb / m[m.size() / 2], vs[v].mb / m[m.size() / 10]);
    }
}
