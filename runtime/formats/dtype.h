// dtype.h — the element types the runtime knows, in one table: each one's
// safetensors name, its name in a manifest (torch's Python name), its size, and
// torch's ScalarType. The ScalarType column is a bare token that only torch-side
// code expands (exec/torch_dtype.h), so this header stays torch-free.
#pragma once

#include <cstdint>
#include <string>

#define GPT_DTYPES(X)                  \
    X("F64", "float64", 8, Double)     \
    X("F32", "float32", 4, Float)      \
    X("F16", "float16", 2, Half)       \
    X("BF16", "bfloat16", 2, BFloat16) \
    X("I64", "int64", 8, Long)         \
    X("I32", "int32", 4, Int)          \
    X("I16", "int16", 2, Short)        \
    X("I8", "int8", 1, Char)           \
    X("U8", "uint8", 1, Byte)          \
    X("BOOL", "bool", 1, Bool)

namespace gpt {

struct Dtype {
    const char *safetensors_name;  // "F32"
    const char *name;              // "float32", as a manifest names it
    uint64_t bytes;                // per element
};

// The entry for a safetensors or manifest name; nullptr if the runtime does not know it.
const Dtype *dtype_from_safetensors_name(const std::string &safetensors_name);
const Dtype *dtype_from_name(const std::string &name);

}  // namespace gpt
