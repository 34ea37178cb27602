// safetensors.h — a strict reader of the safetensors format (8-byte header
// length, JSON header, one flat data region) from verified bytes.
#pragma once

#include <ATen/Tensor.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "formats/files.h"

namespace gpt {

// Parses `data` and returns one CPU tensor per entry (copied, so `data` may go).
// Rejects oversized headers, unknown dtypes, shapes that disagree with byte
// lengths, offsets outside the data, overlaps and gaps, with GPT_ERR_ARTIFACT_INVALID
// naming `what` (the file).
// `metadata`, when given, receives the header's __metadata__ string map.
std::map<std::string, at::Tensor> parse_safetensors(const unsigned char *data, size_t size, const std::string &what,
                                                    std::map<std::string, std::string> *metadata = nullptr);

// As parse_safetensors, but reads the file straight into the tensors (the data
// is in memory once, not as file bytes and again as tensors) and returns them
// only after file.finish(): for a ListedFileReader, once the whole file's
// sha256 is the manifest's. Bytes that do not parse in a listed file fail as
// corrupt (GPT_ERR_ARTIFACT_HASH) unless their hash is right.
// Each tensor in memory of its own (host_pages.h's empty_in_host_pages).
std::map<std::string, at::Tensor> read_safetensors(FileReader &file,
                                                   std::map<std::string, std::string> *metadata = nullptr);

// As read_safetensors, for what each decode step reads: the tensors side by side in one HostArena
// (host_pages.h), views of its storage at offsets, but for those named in `apart`, each in memory of its own
// (what the caller frees early: an arena stays while any of its tensors does).
std::map<std::string, at::Tensor> read_safetensors_in_arena(FileReader &file, const std::set<std::string> &apart);

// Writes `tensors` through `put` as a safetensors file, laid out contiguously
// in name order; each tensor is moved to the CPU only while it is written.
void write_safetensors(const std::map<std::string, at::Tensor> &tensors,
                       const std::map<std::string, std::string> &metadata, const ByteSink &put);

}  // namespace gpt
