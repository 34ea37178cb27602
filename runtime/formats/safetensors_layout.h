// safetensors_layout.h — the safetensors layout (8-byte little-endian header
// length, JSON header, one flat data region), checked without torch so that the
// fuzzers and sanitizer builds cover it (fuzz/).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formats/dtype.h"

namespace gpt {

struct SafetensorsEntry {
    std::string name;
    const Dtype *dtype = nullptr;  // an entry of the dtype table, never null once parsed
    std::vector<int64_t> shape;    // each dim <= INT64_MAX; product * dtype size == end - begin
    uint64_t begin = 0, end = 0;   // byte range inside the data region
};

struct SafetensorsLayout {
    std::vector<SafetensorsEntry> entries;        // in file order: by offset, an empty entry before one at its offset
    std::map<std::string, std::string> metadata;  // __metadata__
    const unsigned char *data = nullptr;          // start of the data region in the parsed bytes (null from a header)
    uint64_t data_size = 0;
};

// Checks `bytes` and returns where each tensor lies. Rejects oversized headers,
// unknown dtypes, shapes that disagree with byte lengths, offsets outside the
// data, overlaps, gaps and trailing bytes, with GPT_ERR_ARTIFACT_INVALID naming
// `what` (the file). Every size is computed with overflow-checked arithmetic.
SafetensorsLayout parse_safetensors_layout(const unsigned char *bytes, size_t size, const std::string &what);

// The pieces of the above for a reader that streams the file: the header's
// length from the file's first 8 bytes, then the header alone, checked against
// the `data_size` bytes that follow it.
uint64_t safetensors_header_length(const unsigned char *first8, uint64_t file_size, const std::string &what);
SafetensorsLayout parse_safetensors_header(const unsigned char *header, uint64_t header_len, uint64_t data_size,
                                           const std::string &what);

}  // namespace gpt
