// element_type.h — the element types the CPU kernels read, as plain bits (no torch types on the vector paths).
#pragma once

namespace gpt::kernels {

enum class ElementType { f32, bf16, f16 };  // bf16 and f16 elements are 16-bit patterns (uint16_t)

}  // namespace gpt::kernels
