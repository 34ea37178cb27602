// registration.cpp — the gpt_kernels operators, registered with torch's dispatcher when this file's object loads:
// their schemas, the CPU kernels, the shape functions export and compile trace with, and the library's version.
#include <torch/library.h>

#include "cpu/decode_attention.h"
#include "cpu/isa.h"
#include "cpu/linear.h"
#include "cpu/threads.h"
#include "kernels.h"

namespace {

int64_t kernels_version() { return GPT_KERNELS_VERSION; }

std::string active_path() { return gpt::kernels::isa_name(gpt::kernels::active_isa()); }

// "" gives the choice back to the CPU and GPT_KERNELS_ISA.
void use_path(const std::string &path) {
    gpt::kernels::override_isa(path.empty() ? std::nullopt : std::optional(gpt::kernels::parse_isa(path, "use_path")));
}

}  // namespace

TORCH_LIBRARY(gpt_kernels, m) {
    m.def("version() -> int", &kernels_version);
    m.def("threaded() -> bool", &gpt::kernels::threaded);  // the compile refuses a build whose loops run on one thread
    // The vector path every kernel runs (cpu/isa.h), and the compile's override of it while it measures a level.
    m.def("active_path() -> str", &active_path);
    m.def("use_path(str path) -> ()", &use_path);
    m.def(
        "decode_attention(Tensor q, Tensor k, Tensor v, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor pos, "
        "float scale) -> Tensor");
    m.def(
        "decode_attention_rows(Tensor q, Tensor k, Tensor v, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor pos, "
        "Tensor seq, float scale) -> Tensor");
    m.def("linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor");
    m.def("linear_int8(Tensor x, Tensor weight, Tensor scale, Tensor? bias) -> Tensor");
    m.def("linear_int8_q8(Tensor x, Tensor weight, Tensor scale, Tensor? bias) -> Tensor");
    m.def("linear_int4(Tensor x, Tensor weight, Tensor scale_zero, int rows, Tensor? bias) -> Tensor");
    m.def("linear_panels(Tensor x, Tensor weight, Tensor? bias) -> Tensor");
    m.def("pack_linear_panels(Tensor weight) -> Tensor");
    m.def("linear_int8_q8_panels(Tensor x, Tensor weight, Tensor scale, Tensor? bias) -> Tensor");
    m.def("pack_linear_q8_panels(Tensor weight) -> Tensor");
    m.def("linear_int4_panels(Tensor x, Tensor weight, Tensor scale_zero, int rows, Tensor? bias) -> Tensor");
    m.def("pack_linear_int4_panels(Tensor weight) -> Tensor");
}

TORCH_LIBRARY_IMPL(gpt_kernels, CPU, m) {
    m.impl("decode_attention", &gpt::kernels::decode_attention_cpu);
    m.impl("decode_attention_rows", &gpt::kernels::decode_attention_rows_cpu);
    m.impl("linear", &gpt::kernels::linear_cpu);
    m.impl("linear_int8", &gpt::kernels::linear_int8_cpu);
    m.impl("linear_int8_q8", &gpt::kernels::linear_int8_q8_cpu);
    m.impl("linear_int4", &gpt::kernels::linear_int4_cpu);
    m.impl("linear_panels", &gpt::kernels::linear_panels_cpu);
    m.impl("pack_linear_panels", &gpt::kernels::pack_linear_panels);
    m.impl("linear_int8_q8_panels", &gpt::kernels::linear_int8_q8_panels_cpu);
    m.impl("pack_linear_q8_panels", &gpt::kernels::pack_linear_q8_panels);
    m.impl("linear_int4_panels", &gpt::kernels::linear_int4_panels_cpu);
    m.impl("pack_linear_int4_panels", &gpt::kernels::pack_linear_int4_panels);
}

TORCH_LIBRARY_IMPL(gpt_kernels, Meta, m) {
    m.impl("decode_attention", &gpt::kernels::decode_attention_meta);
    m.impl("decode_attention_rows", &gpt::kernels::decode_attention_rows_meta);
    m.impl("linear", &gpt::kernels::linear_meta);
    m.impl("linear_int8", &gpt::kernels::linear_int8_meta);
    m.impl("linear_int8_q8", &gpt::kernels::linear_int8_meta);
    m.impl("linear_int4", &gpt::kernels::linear_int4_meta);
    m.impl("linear_panels", &gpt::kernels::linear_meta);
    m.impl("linear_int8_q8_panels", &gpt::kernels::linear_int8_meta);
    m.impl("linear_int4_panels", &gpt::kernels::linear_int4_meta);
}
