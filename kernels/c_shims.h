// c_shims.h — the kernel library's operators as C functions that AOTInductor-compiled graphs call directly.
//
// A graph calls an operator outside torch's C shim through its proxy executor: per call the arguments boxed from
// a JSON description, the schema's dispatch, the outputs unboxed (GPT-2 124M's decode step makes 61 such calls,
// 355M's 121). Given a declaration for an operator (AOTInductor's `custom_ops_to_c_shims`), the generated wrapper
// instead calls `aoti_torch_cpu_<operator>` with the tensors' handles, as it calls torch's own shim functions.
//
// Each GPT_KERNELS_SHIM line below is one operator's declaration, in AOTInductor's convention: a tensor's handle, a
// pointer to one for an optional tensor (null for none), int64_t for int, double for float, and last a pointer for
// the result's new handle. The compile reads this file (aot/gpt_aot/model/kernels.py) and declares exactly these
// functions to AOTInductor. Keep one declaration a line.
//
// A graph's library binds these calls in the process's global scope when it loads. So that nothing else enters that
// scope, they are defined in a library of their own with no dependency but libc, libgpt_kernel_shims
// (c_shim_exports.cpp): each forwards to the kernel library's definition (c_shims.cpp) through the table the kernel
// library installs when it loads. Making the kernel library itself global would put its dependencies there too:
// libtorch_cpu's MKL and oneDNN symbols, to which another library loaded later in the process (CTranslate2, which
// bundles its own) then binds, and computes wrong results.
#pragma once

#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#define GPT_KERNELS_SHIM extern "C" __attribute__((visibility("default")))

// clang-format off
GPT_KERNELS_SHIM AOTITorchError aoti_torch_cpu_linear(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle *bias, AtenTensorHandle *ret0);
GPT_KERNELS_SHIM AOTITorchError aoti_torch_cpu_linear_panels(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle *bias, AtenTensorHandle *ret0);
GPT_KERNELS_SHIM AOTITorchError aoti_torch_cpu_linear_int8(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale, AtenTensorHandle *bias, AtenTensorHandle *ret0);
GPT_KERNELS_SHIM AOTITorchError aoti_torch_cpu_linear_int8_q8(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale, AtenTensorHandle *bias, AtenTensorHandle *ret0);
GPT_KERNELS_SHIM AOTITorchError aoti_torch_cpu_linear_int8_q8_panels(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale, AtenTensorHandle *bias, AtenTensorHandle *ret0);
GPT_KERNELS_SHIM AOTITorchError aoti_torch_cpu_linear_int4(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale_zero, int64_t rows, AtenTensorHandle *bias, AtenTensorHandle *ret0);
GPT_KERNELS_SHIM AOTITorchError aoti_torch_cpu_linear_int4_panels(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale_zero, int64_t rows, AtenTensorHandle *bias, AtenTensorHandle *ret0);
GPT_KERNELS_SHIM AOTITorchError aoti_torch_cpu_decode_attention(AtenTensorHandle q, AtenTensorHandle k, AtenTensorHandle v, AtenTensorHandle k_cache, AtenTensorHandle v_cache, AtenTensorHandle pos, double scale, AtenTensorHandle *ret0);
GPT_KERNELS_SHIM AOTITorchError aoti_torch_cpu_decode_attention_rows(AtenTensorHandle q, AtenTensorHandle k, AtenTensorHandle v, AtenTensorHandle k_cache, AtenTensorHandle v_cache, AtenTensorHandle pos, AtenTensorHandle seq, double scale, AtenTensorHandle *ret0);
// clang-format on

// The kernel library's definitions, one member per function above, of the same type.
struct GptKernelShimTable {
    decltype(&aoti_torch_cpu_linear) linear;
    decltype(&aoti_torch_cpu_linear_panels) linear_panels;
    decltype(&aoti_torch_cpu_linear_int8) linear_int8;
    decltype(&aoti_torch_cpu_linear_int8_q8) linear_int8_q8;
    decltype(&aoti_torch_cpu_linear_int8_q8_panels) linear_int8_q8_panels;
    decltype(&aoti_torch_cpu_linear_int4) linear_int4;
    decltype(&aoti_torch_cpu_linear_int4_panels) linear_int4_panels;
    decltype(&aoti_torch_cpu_decode_attention) decode_attention;
    decltype(&aoti_torch_cpu_decode_attention_rows) decode_attention_rows;
};

// Called by the kernel library when it loads (its table), and when it unloads (null): a call then fails with
// AOTI_TORCH_FAILURE, as a graph's call of a failing torch shim does.
GPT_KERNELS_SHIM void gpt_kernel_shims_install(const GptKernelShimTable *table);
