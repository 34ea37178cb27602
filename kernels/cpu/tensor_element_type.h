// tensor_element_type.h — a tensor dtype as the ElementType the kernels read: what the operators' checks share.
#pragma once

#include <c10/core/ScalarType.h>

#include <stdexcept>
#include <string>

#include "cpu/element_type.h"

namespace gpt::kernels {

// Throws std::invalid_argument naming `op` for a dtype that is not float, bfloat16 or half.
inline ElementType element_type(c10::ScalarType type, const char *op) {
    switch (type) {
        case c10::kFloat: return ElementType::f32;
        case c10::kBFloat16: return ElementType::bf16;
        case c10::kHalf: return ElementType::f16;
        default: break;
    }
    throw std::invalid_argument(std::string(op) + ": dtype " + c10::toString(type) + " is not float, bfloat16 or half");
}

}  // namespace gpt::kernels
