// c_shim_exports.cpp — libgpt_kernel_shims: the C functions of c_shims.h that compiled graphs bind to, each a call
// through the table the kernel library installed (c_shims.cpp). The library's only dependency is libc, so making it
// global (runtime/exec/graph.cpp, aot/gpt_aot/model/kernels.py) puts these names in the process's global scope and
// nothing else. Its soname carries GPT_KERNELS_VERSION: the table is that version's.
#include <atomic>

#include "c_shims.h"

namespace {

// Written when a kernel library loads or unloads, read by every graph's call from any thread.
std::atomic<const GptKernelShimTable *> installed{nullptr};

// The installed table, or null: no kernel library in this process (never so while a graph that calls one runs).
const GptKernelShimTable *table() { return installed.load(std::memory_order_acquire); }

}  // namespace

void gpt_kernel_shims_install(const GptKernelShimTable *table) { installed.store(table, std::memory_order_release); }

AOTITorchError aoti_torch_cpu_linear(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle *bias,
                                     AtenTensorHandle *ret0) {
    const auto *t = table();
    return t ? t->linear(x, weight, bias, ret0) : AOTI_TORCH_FAILURE;
}

AOTITorchError aoti_torch_cpu_linear_panels(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle *bias,
                                            AtenTensorHandle *ret0) {
    const auto *t = table();
    return t ? t->linear_panels(x, weight, bias, ret0) : AOTI_TORCH_FAILURE;
}

AOTITorchError aoti_torch_cpu_linear_int8(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale,
                                          AtenTensorHandle *bias, AtenTensorHandle *ret0) {
    const auto *t = table();
    return t ? t->linear_int8(x, weight, scale, bias, ret0) : AOTI_TORCH_FAILURE;
}

AOTITorchError aoti_torch_cpu_linear_int8_q8(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale,
                                             AtenTensorHandle *bias, AtenTensorHandle *ret0) {
    const auto *t = table();
    return t ? t->linear_int8_q8(x, weight, scale, bias, ret0) : AOTI_TORCH_FAILURE;
}

AOTITorchError aoti_torch_cpu_linear_int8_q8_panels(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale,
                                                    AtenTensorHandle *bias, AtenTensorHandle *ret0) {
    const auto *t = table();
    return t ? t->linear_int8_q8_panels(x, weight, scale, bias, ret0) : AOTI_TORCH_FAILURE;
}

AOTITorchError aoti_torch_cpu_linear_int4(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale_zero,
                                          int64_t rows, AtenTensorHandle *bias, AtenTensorHandle *ret0) {
    const auto *t = table();
    return t ? t->linear_int4(x, weight, scale_zero, rows, bias, ret0) : AOTI_TORCH_FAILURE;
}

AOTITorchError aoti_torch_cpu_linear_int4_panels(AtenTensorHandle x, AtenTensorHandle weight,
                                                 AtenTensorHandle scale_zero, int64_t rows, AtenTensorHandle *bias,
                                                 AtenTensorHandle *ret0) {
    const auto *t = table();
    return t ? t->linear_int4_panels(x, weight, scale_zero, rows, bias, ret0) : AOTI_TORCH_FAILURE;
}

AOTITorchError aoti_torch_cpu_decode_attention(AtenTensorHandle q, AtenTensorHandle k, AtenTensorHandle v,
                                               AtenTensorHandle k_cache, AtenTensorHandle v_cache, AtenTensorHandle pos,
                                               double scale, AtenTensorHandle *ret0) {
    const auto *t = table();
    return t ? t->decode_attention(q, k, v, k_cache, v_cache, pos, scale, ret0) : AOTI_TORCH_FAILURE;
}

AOTITorchError aoti_torch_cpu_decode_attention_rows(AtenTensorHandle q, AtenTensorHandle k, AtenTensorHandle v,
                                                    AtenTensorHandle k_cache, AtenTensorHandle v_cache,
                                                    AtenTensorHandle pos, AtenTensorHandle seq, double scale,
                                                    AtenTensorHandle *ret0) {
    const auto *t = table();
    return t ? t->decode_attention_rows(q, k, v, k_cache, v_cache, pos, seq, scale, ret0) : AOTI_TORCH_FAILURE;
}
