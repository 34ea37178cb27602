// linear_bench — the kernel library's linear (kernels/cpu/linear.h) against torch's CPU linear on the same bf16
// weights, and torch's fp32 linear on those weights widened (what an fp32 artifact would run); its int4 linear
// against aten's CPU int4 kernel (the int4pack form) on the same int4 values, groups of 32; its int8 linear against
// aten's int8 kernel (the int8pack form) on int8 rows; at GPT-2 124M's linear shapes and the row counts of a decode
// step (1..16), an extend and a prefill. Prints one JSON object a line: shape, rows, and the median milliseconds of
// each over --reps calls (after one warm-up call).
// --size 355m takes GPT-2 medium's shapes; --cold calls copies of each weight in turn, so that every call reads its
// weight from memory (as a decode step over a model far larger than the caches does).
//   linear_bench [--threads N] [--reps R] [--rows 1,4,16,...] [--size 124m|355m] [--cold]
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

constexpr int64_t INT4_GROUP = 32;        // quantize.py's default group
constexpr int64_t COLD_BYTES = 96 << 20;  // --cold: the bf16 bytes of each shape's copies, past any cache

// One (n, k) linear's weights in every form the bench runs, from the same random bf16 values.
struct Weights {
    at::Tensor bf16, fp32, panels;
    // int4 values: our blocks of 64 rows as stored, aten's packing; their (scale, zero) pairs block by block as
    // stored (linear.py's to_int4_pair_blocks) and group by group, as aten's kernel reads them
    at::Tensor int4_blocks, int4pack, pair_blocks, scale_zero;
    at::Tensor int4_panels;       // the blocks packed in u4 panels
    at::Tensor int8, int8_scale;  // int8 rows with a scale each (quantize.py's "rows")
    at::Tensor int8_panels;       // the same packed in q8 panels
};

Weights make_weights(int64_t n, int64_t k) {
    Weights w;
    w.bf16 = (at::randn({n, k}) * 0.02).to(at::kBFloat16);
    w.fp32 = w.bf16.to(at::kFloat);
    w.panels = gpt::kernels::pack_linear_panels(w.bf16);
    const int64_t padded = (n + 63) / 64 * 64;
    const at::Tensor q = at::randint(0, 16, {padded, k}, at::kInt);
    const at::Tensor halves = q.view({-1, 2, 32, k});
    w.int4_blocks = at::bitwise_or(halves.select(1, 0), halves.select(1, 1).mul(16))
                        .to(at::kByte)
                        .transpose(1, 2)
                        .contiguous()
                        .view({padded, k / 2});
    w.int4pack = at::_convert_weight_to_int4pack_for_cpu(q, 1);
    w.int4_panels = gpt::kernels::pack_linear_int4_panels(w.int4_blocks);
    w.scale_zero = (at::rand({k / INT4_GROUP, padded, 2}) * 0.01).to(at::kBFloat16);
    w.pair_blocks = w.scale_zero.view({k / INT4_GROUP, padded / 64, 64, 2}).transpose(0, 1).contiguous();
    w.int8 = at::randint(-127, 128, {n, k}, at::kChar);
    w.int8_scale = (at::rand({n}) * 0.001).to(at::kBFloat16);
    w.int8_panels = gpt::kernels::pack_linear_q8_panels(w.int8);
    return w;
}

}  // namespace

int main(int argc, char **argv) {
    int threads = 2, reps = 9;
    std::string size = "124m";
    bool cold = false;
    std::vector<int64_t> rows = {1, 4, 8, 16, 64, 256, 900};
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--cold") == 0) cold = true;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--rows") == 0) rows = parse_rows(argv[i + 1]);
        if (std::strcmp(argv[i], "--size") == 0) size = argv[i + 1];
    }
    at::set_num_threads(threads);
    const gpt::kernels::Isa isa = gpt::kernels::active_isa();
    struct Shape {
        const char *name;
        int64_t n, k;
    };
    // GPT-2's linears: attention in and out, the MLP's two, and the vocabulary head, at width C.
    if (size != "124m" && size != "355m") {
        std::fprintf(stderr, "linear_bench: --size is 124m or 355m, not %s\n", size.c_str());
        return 2;
    }
    const int64_t C = size == "124m" ? 768 : 1024;
    const Shape shapes[] = {{"c_attn", 3 * C, C},
                            {"attn.c_proj", C, C},
                            {"c_fc", 4 * C, C},
                            {"mlp.c_proj", C, 4 * C},
                            {"lm_head", 50304, C}};
    at::manual_seed(0);
    for (const Shape &s : shapes) {
        // --cold: enough copies of each weight, called in turn, that each call reads its weight from memory as a
        // decode step does (a model's weights are far larger than the caches), not from the last call's cache.
        const int64_t copies = cold ? std::max<int64_t>(1, COLD_BYTES / (s.n * s.k * 2) + 1) : 1;
        std::vector<Weights> weights;
        for (int64_t c = 0; c < copies; ++c) weights.push_back(make_weights(s.n, s.k));
        const at::Tensor b = at::zeros({s.n}, at::kBFloat16), b32 = b.to(at::kFloat);
        for (const int64_t m : rows) {
            const at::Tensor x = at::randn({m, s.k}).to(at::kBFloat16);
            const at::Tensor x32 = x.to(at::kFloat);
            int64_t turn = 0;
            const auto each = [&](const std::function<void(const Weights &)> &call) {
                return median_ms(reps, [&] { call(weights[static_cast<size_t>(turn++ % copies)]); });
            };
            const double ours = each([&](const Weights &w) { gpt::kernels::linear(x, w.bf16, b, isa); });
            const double ours_panels =
                each([&](const Weights &w) { gpt::kernels::linear_panels(x, w.panels, b, isa); });
            const double torch_bf16 = each([&](const Weights &w) { at::linear(x, w.bf16, b); });
            const double torch_fp32 = each([&](const Weights &w) { at::linear(x32, w.fp32, b32); });
            const double ours_int4 = each(
                [&](const Weights &w) { gpt::kernels::linear_int4(x, w.int4_blocks, w.pair_blocks, s.n, b, isa); });
            const double ours_int4_panels = each([&](const Weights &w) {
                gpt::kernels::linear_int4_panels(x, w.int4_panels, w.pair_blocks, s.n, b, isa);
            });
            const double torch_int4 = each(
                [&](const Weights &w) { at::_weight_int4pack_mm_for_cpu(x, w.int4pack, INT4_GROUP, w.scale_zero); });
            const double ours_int8 =
                each([&](const Weights &w) { gpt::kernels::linear_int8(x, w.int8, w.int8_scale, b, isa); });
            const double ours_int8_q8 =
                each([&](const Weights &w) { gpt::kernels::linear_int8_q8(x, w.int8, w.int8_scale, b, isa); });
            const double ours_int8_q8_panels = each(
                [&](const Weights &w) { gpt::kernels::linear_int8_q8_panels(x, w.int8_panels, w.int8_scale, b, isa); });
            const double torch_int8 = each([&](const Weights &w) { at::_weight_int8pack_mm(x, w.int8, w.int8_scale); });
            std::printf(
                "{\"shape\": \"%s\", \"n\": %lld, \"k\": %lld, \"rows\": %lld, \"isa\": \"%s\", \"threads\": %d, "
                "\"cold\": %s, \"kernel_bf16_ms\": %.4f, \"kernel_panels_ms\": %.4f, \"torch_bf16_ms\": %.4f, "
                "\"torch_fp32_ms\": %.4f, \"kernel_int4_ms\": %.4f, \"kernel_int4_panels_ms\": %.4f, "
                "\"torch_int4_ms\": %.4f, \"kernel_int8_ms\": %.4f, "
                "\"kernel_int8_q8_ms\": %.4f, \"kernel_int8_q8_panels_ms\": %.4f, \"torch_int8_ms\": %.4f}\n",
                s.name, static_cast<long long>(s.n), static_cast<long long>(s.k), static_cast<long long>(m),
                gpt::kernels::isa_name(isa), threads, cold ? "true" : "false", ours, ours_panels, torch_bf16,
                torch_fp32, ours_int4, ours_int4_panels, torch_int4, ours_int8, ours_int8_q8, ours_int8_q8_panels,
                torch_int8);
            std::fflush(stdout);
        }
    }
    return 0;
}
