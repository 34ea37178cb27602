// element_type.h — the element types the CPU kernels read, as plain bits (no torch types on the vector paths).
#pragma once

namespace gpt::kernels {

// bf16 and f16 elements are 16-bit patterns (uint16_t); s8 (int8) only as a linear's weights, each row with a scale;
// u4 (int4, two a byte in blocks of 64 rows) only as a linear's weights, with a scale and a zero per group of inputs.
enum class ElementType { f32, bf16, f16, s8, u4 };

}  // namespace gpt::kernels
