// fuzz_safetensors.cpp — safetensors bytes (weights, golden vectors, checkpoints)
// into parse_safetensors_layout (runtime/formats/safetensors_layout.cpp).
#include <cstdint>

#include "base/error.h"
#include "formats/safetensors_layout.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gpt::SafetensorsLayout layout;
    try {
        layout = gpt::parse_safetensors_layout(data, size, "fuzz.safetensors");
    } catch (const gpt::Error &) {
        return 0;
    }
    // Accepted: the entries tile the data region inside the input, each exactly
    // as long as its shape and dtype say. Touching every byte lets ASan check it.
    FUZZ_CHECK(layout.data >= data && layout.data_size <= size &&
               static_cast<size_t>(layout.data - data) == size - layout.data_size);
    uint64_t covered = 0;
    volatile unsigned sum = 0;
    for (const auto &e : layout.entries) {
        uint64_t n = e.dtype->bytes, extent = n;
        for (int64_t d : e.shape) {  // cannot overflow: the reader checked both
            n *= static_cast<uint64_t>(d);
            extent *= static_cast<uint64_t>(d > 1 ? d : 1);
            FUZZ_CHECK(extent <= static_cast<uint64_t>(INT64_MAX));  // a tensor of this shape can be made
        }
        FUZZ_CHECK(e.begin <= e.end && e.end <= layout.data_size && e.end - e.begin == n);
        for (uint64_t i = e.begin; i < e.end; ++i) sum = sum + layout.data[i];
        covered += e.end - e.begin;
    }
    FUZZ_CHECK(covered == layout.data_size);  // no gap, no overlap, no tail
    return 0;
}
