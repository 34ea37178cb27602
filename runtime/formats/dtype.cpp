// dtype.cpp — lookups in the one dtype table (dtype.h).
#include "formats/dtype.h"

#include <iterator>

namespace gpt {

namespace {

#define GPT_DTYPE_ENTRY(safetensors_name, name, bytes, scalar_type) Dtype{safetensors_name, name, bytes},
constexpr Dtype kDtypes[] = {GPT_DTYPES(GPT_DTYPE_ENTRY)};
#undef GPT_DTYPE_ENTRY

}  // namespace

const Dtype *dtype_from_safetensors_name(const std::string &safetensors_name) {
    for (const Dtype &d : kDtypes)
        if (safetensors_name == d.safetensors_name) return &d;
    return nullptr;
}

const Dtype *dtype_from_name(const std::string &name) {
    for (const Dtype &d : kDtypes)
        if (name == d.name) return &d;
    return nullptr;
}

}  // namespace gpt
