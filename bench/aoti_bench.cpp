// aoti_bench — the "plain AOTInductor" peer of bench/runtime_bench.c: the same
// prefill + greedy decode loop over packages from bench/aoti_plain.py, run by
// torch's AOTIModelPackageLoader directly (no runtime, no checks). Prints JSON.
//   aoti_bench DIR --threads N --batch B --context C --tokens T --reps R [--cuda 1]
// With --cuda 1 the tensors are on GPU 0 (the packages were compiled for it) and each
// step's argmax comes back to the host, as a plain loop over torch's loader would.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "peak_rss.h"

namespace {

int arg_int(int argc, char **argv, const char *name, int fallback) {
    for (int i = 2; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
    return fallback;
}

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void print_list(const char *name, const std::vector<double> &v) {
    std::printf("\"%s\": [", name);
    for (size_t i = 0; i < v.size(); ++i) std::printf("%s%.4f", i ? ", " : "", v[i]);
    std::printf("]");
}

// The graphs take the cache as each layer's k and v views of its first `positions`
// (aot/gpt_aot/model/gpt.py, layer_caches).
std::vector<at::Tensor> with_cache(std::vector<at::Tensor> inputs, const at::Tensor &kv, int64_t positions) {
    for (int64_t layer = 0; layer < kv.size(0); ++layer)
        for (int64_t kind = 0; kind < 2; ++kind)
            inputs.push_back(kv.select(0, layer).select(0, kind).narrow(2, 0, positions));
    return inputs;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr,
                     "usage: aoti_bench DIR [--threads N] [--batch B] [--context C] [--tokens T] [--reps R] [--bf16 1] "
                     "--vocab V\n");
        return 2;
    }
    const std::string dir = argv[1];
    if (const int threads = arg_int(argc, argv, "--threads", 0); threads > 0) at::set_num_threads(threads);
    const int context = arg_int(argc, argv, "--context", 128), tokens = arg_int(argc, argv, "--tokens", 32);
    const int reps = arg_int(argc, argv, "--reps", 3), vocab = arg_int(argc, argv, "--vocab", 0);
    const int batch = arg_int(argc, argv, "--batch", 1);
    const int n_layer = arg_int(argc, argv, "--n-layer", 0), n_head = arg_int(argc, argv, "--n-head", 0);
    const int head_dim = arg_int(argc, argv, "--head-dim", 0), block = arg_int(argc, argv, "--block", 0);
    const bool bf16 = arg_int(argc, argv, "--bf16", 0) != 0;  // the graphs' dtype, for the cache
    const c10::Device device = arg_int(argc, argv, "--cuda", 0) != 0 ? c10::Device(c10::kCUDA, 0) : c10::kCPU;
    try {
        const c10::DeviceIndex index = device.is_cuda() ? device.index() : c10::DeviceIndex{-1};
        torch::inductor::AOTIModelPackageLoader prefill(dir + "/prefill.pt2", "model", false, 1, index);
        torch::inductor::AOTIModelPackageLoader decode(dir + "/decode.pt2", "model", false, 1, index);
        const auto i64 = at::TensorOptions().dtype(at::kLong).device(device);
        at::Tensor prompt = at::empty({1, context}, i64.device(at::kCPU));
        for (int i = 0; i < context; ++i) prompt[0][i] = (i * 7 + 3) % vocab;
        prompt = prompt.expand({batch, context}).contiguous().to(device);  // the same prompt in every row
        std::vector<double> prefill_ms, decode_ms;
        std::vector<long> generated;
        for (int r = 0; r < reps; ++r) {
            // One spare position, as the graphs were exported with (GPT.new_kv_cache).
            at::Tensor kv = at::zeros({n_layer, 2, batch, n_head, block + 1, head_dim},
                                      at::TensorOptions().dtype(bf16 ? at::kBFloat16 : at::kFloat).device(device));
            const double t0 = now_ms();
            at::Tensor logits = prefill.run(with_cache({prompt}, kv, block)).at(0);
            at::Tensor next = logits.slice(1, 0, vocab).argmax(-1, true);
            next.to(at::kCPU);  // the prefill has finished (a GPU runs it asynchronously)
            const double t1 = now_ms();
            generated.clear();
            for (int i = 0; i < tokens; ++i) {
                generated.push_back(next[0][0].item<long>());
                logits = decode.run(with_cache({next, at::full({batch}, context + i, i64)}, kv, context + i + 1)).at(0);
                next = logits.slice(1, 0, vocab).argmax(-1, true);
            }
            next.to(at::kCPU);  // the last step has finished
            prefill_ms.push_back(t1 - t0);
            decode_ms.push_back((now_ms() - t1) / tokens);
        }
        std::printf("{");
        print_list("prefill_ms", prefill_ms);
        std::printf(", ");
        print_list("decode_ms_per_token", decode_ms);
        std::printf(", \"tokens\": [");
        for (size_t i = 0; i < generated.size(); ++i) std::printf("%s%ld", i ? ", " : "", generated[i]);
        std::printf("], \"peak_rss_mib\": %.1f}\n", peak_rss_mib());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "aoti_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
