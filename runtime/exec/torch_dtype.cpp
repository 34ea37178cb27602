// torch_dtype.cpp — the dtype table's ScalarType column, expanded torch-side.
#include "exec/torch_dtype.h"

#include <cstring>

namespace gpt {

c10::ScalarType scalar_type(const Dtype &dtype) {
#define GPT_SCALAR_TYPE_IF(safetensors_name, dtype_name, bytes, scalar) \
    if (std::strcmp(dtype.name, dtype_name) == 0) return c10::ScalarType::scalar;
    GPT_DTYPES(GPT_SCALAR_TYPE_IF)
#undef GPT_SCALAR_TYPE_IF
    return c10::ScalarType::Undefined;  // unreachable: every entry has a type
}

const Dtype *dtype_of(c10::ScalarType type) {
#define GPT_DTYPE_IF(safetensors_name, dtype_name, bytes, scalar) \
    if (type == c10::ScalarType::scalar) return dtype_from_name(dtype_name);
    GPT_DTYPES(GPT_DTYPE_IF)
#undef GPT_DTYPE_IF
    return nullptr;
}

}  // namespace gpt
