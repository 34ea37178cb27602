// safetensors.h — a strict reader of the safetensors format (8-byte header
// length, JSON header, one flat data region) from verified bytes.
#pragma once

#include <ATen/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "integrity.h"

namespace gpt {

// Parses `data` and returns one CPU tensor per entry (copied, so `data` may go).
// Rejects oversized headers, unknown dtypes, shapes that disagree with byte
// lengths, offsets outside the data, overlaps and gaps, with GPT_ERR_ARTIFACT_INVALID
// naming `what` (the file).
// `metadata`, when given, receives the header's __metadata__ string map.
std::map<std::string, at::Tensor> parse_safetensors(const unsigned char *data, size_t size, const std::string &what,
                                                    std::map<std::string, std::string> *metadata = nullptr);

// Reads a listed safetensors file straight into one CPU tensor per entry (the
// data is in memory once, not as file bytes and again as tensors) and returns
// them only once the whole file's sha256 is the manifest's. Bytes that do not
// parse fail as corrupt (GPT_ERR_ARTIFACT_HASH) unless their hash is right.
std::map<std::string, at::Tensor> read_verified_safetensors(ListedFileReader &file);

// The file bytes for `tensors` (moved to CPU, laid out contiguously in name order).
std::vector<unsigned char> serialize_safetensors(const std::map<std::string, at::Tensor> &tensors,
                                                 const std::map<std::string, std::string> &metadata);

}  // namespace gpt
