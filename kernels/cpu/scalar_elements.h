// scalar_elements.h — element i of a float, bfloat16, half or int8 array as a float, by torch's own conversions: the
// scalar reference paths' one way to read what the vector paths widen in registers.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace gpt::kernels {

template <class T>
float element(const void *base, int64_t i) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, int8_t>) {
        return static_cast<float>(static_cast<const T *>(base)[i]);
    } else {
        T value;
        std::memcpy(&value, static_cast<const uint16_t *>(base) + i, sizeof(value));
        return static_cast<float>(value);
    }
}

}  // namespace gpt::kernels
