// linear_bench — the kernel library's linear (kernels/cpu/linear.h) against torch's CPU linear on the same bf16
// weights, and torch's fp32 linear on those weights widened (what an fp32 artifact would run); its int4 linear
// against aten's CPU int4 kernel (the int4pack form) on the same int4 values, groups of 32; at GPT-2 124M's
// linear shapes and the row counts of a decode step (1..16), an extend and a prefill. Prints one JSON object a
// line: shape, rows, and the median milliseconds of each over --reps calls (after one warm-up call).
//   linear_bench [--threads N] [--reps R] [--rows 1,4,16,...]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/linear.h"

namespace {

double median_ms(int reps, const std::function<void()> &call) {
    call();
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        call();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

std::vector<int64_t> parse_rows(const char *list) {
    std::vector<int64_t> rows;
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) rows.push_back(std::atoll(item.c_str()));
    return rows;
}

}  // namespace

int main(int argc, char **argv) {
    int threads = 2, reps = 9;
    std::vector<int64_t> rows = {1, 4, 8, 16, 64, 256, 900};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--rows") == 0) rows = parse_rows(argv[i + 1]);
    }
    at::set_num_threads(threads);
    const gpt::kernels::Isa isa = gpt::kernels::active_isa();
    struct Shape {
        const char *name;
        int64_t n, k;
    };
    // GPT-2 124M's linears: attention in and out, the MLP's two, and the vocabulary head.
    const Shape shapes[] = {{"c_attn", 2304, 768},
                            {"attn.c_proj", 768, 768},
                            {"c_fc", 3072, 768},
                            {"mlp.c_proj", 768, 3072},
                            {"lm_head", 50304, 768}};
    at::manual_seed(0);
    for (const Shape &s : shapes) {
        const at::Tensor w = (at::randn({s.n, s.k}) * 0.02).to(at::kBFloat16);
        const at::Tensor b = at::zeros({s.n}, at::kBFloat16);
        const at::Tensor w32 = w.to(at::kFloat), b32 = b.to(at::kFloat);
        const at::Tensor panels = gpt::kernels::pack_linear_panels(w);
        // int4 in groups of 32 (quantize.py's default): our blocks of 64 rows as stored, aten's as it packs them.
        const int64_t padded = (s.n + 63) / 64 * 64, group = 32;
        const at::Tensor q = at::randint(0, 16, {padded, s.k}, at::kInt);
        const at::Tensor halves = q.view({-1, 2, 32, s.k});
        const at::Tensor blocks = at::bitwise_or(halves.select(1, 0), halves.select(1, 1).mul(16))
                                      .to(at::kByte)
                                      .transpose(1, 2)
                                      .contiguous()
                                      .view({padded, s.k / 2});
        const at::Tensor int4pack = at::_convert_weight_to_int4pack_for_cpu(q, 1);
        const at::Tensor scale_zero = (at::rand({s.k / group, padded, 2}) * 0.01).to(at::kBFloat16);
        for (const int64_t m : rows) {
            const at::Tensor x = at::randn({m, s.k}).to(at::kBFloat16);
            const at::Tensor x32 = x.to(at::kFloat);
            const double ours = median_ms(reps, [&] { gpt::kernels::linear(x, w, b, isa); });
            const double ours_panels = median_ms(reps, [&] { gpt::kernels::linear_panels(x, panels, b, isa); });
            const double torch_bf16 = median_ms(reps, [&] { at::linear(x, w, b); });
            const double torch_fp32 = median_ms(reps, [&] { at::linear(x32, w32, b32); });
            const double ours_int4 =
                median_ms(reps, [&] { gpt::kernels::linear_int4(x, blocks, scale_zero, s.n, b, isa); });
            const double torch_int4 =
                median_ms(reps, [&] { at::_weight_int4pack_mm_for_cpu(x, int4pack, group, scale_zero); });
            std::printf(
                "{\"shape\": \"%s\", \"n\": %lld, \"k\": %lld, \"rows\": %lld, \"isa\": \"%s\", \"threads\": %d, "
                "\"kernel_bf16_ms\": %.4f, \"kernel_panels_ms\": %.4f, \"torch_bf16_ms\": %.4f, \"torch_fp32_ms\": "
                "%.4f, \"kernel_int4_ms\": %.4f, "
                "\"torch_int4_ms\": %.4f}\n",
                s.name, static_cast<long long>(s.n), static_cast<long long>(s.k), static_cast<long long>(m),
                gpt::kernels::isa_name(isa), threads, ours, ours_panels, torch_bf16, torch_fp32, ours_int4, torch_int4);
            std::fflush(stdout);
        }
    }
    return 0;
}
