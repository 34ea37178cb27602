// kernels.h — the kernel library's version, shared by the compile (which records it in a manifest) and the runtime
// (which refuses an artifact that names a version it lacks).
//
// The library is a set of torch operators in the `gpt_kernels` namespace, registered with torch's dispatcher
// when their object files load (TORCH_LIBRARY), which the compile traces and measures; AOTInductor-compiled graphs
// call them as the C functions of c_shims.h, so an artifact that uses one runs only in a process that exports
// them — libgpt_runtime compiles them in, and the Python compile builds the same sources
// (aot/gpt_aot/model/kernels.py).
#pragma once

// Raised whenever an operator's schema or results change: an artifact compiled against version N runs on a
// runtime whose library is version N. An operator added is not a change of version: each artifact names the
// operators its graphs call, and a runtime lacking one refuses it (runtime/artifact/kernels_check.cpp).
//
// 2: linear_int4's scale_zero is (blocks of 64 rows, groups, 64, 2), each block's pairs in one run (1: (groups,
//    rows, 2)); the activations' group sums are added in 8 lanes (linear_q8_activations.cpp), moving the int4 and q8
//    linears' results by float rounding.
// 3: the graphs call the operators as the C functions of c_shims.h (AOTInductor's `custom_ops_to_c_shims`), which a
//    runtime of version 2 does not export: its dlopen of such a graph would fail on an undefined symbol.
// Later, with no version of its own: decode_attention and decode_attention_rows take int8 caches
//    (cpu/kv_row_q8.h). An artifact whose graphs hand them such caches is manifest format 16, which a runtime
//    without them refuses before it runs a graph.
#define GPT_KERNELS_VERSION 3
