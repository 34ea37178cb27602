// safetensors.h — a strict reader of the safetensors format (8-byte header
// length, JSON header, one flat data region) from verified bytes.
#pragma once

#include <ATen/Tensor.h>

#include <map>
#include <string>

namespace gpt {

// Parses `data` and returns one CPU tensor per entry (copied, so `data` may go).
// Rejects oversized headers, unknown dtypes, shapes that disagree with byte
// lengths, offsets outside the data, overlaps and gaps, with GPT_ERR_ARTIFACT_INVALID
// naming `what` (the file).
std::map<std::string, at::Tensor> parse_safetensors(const unsigned char *data, size_t size, const std::string &what);

}  // namespace gpt
