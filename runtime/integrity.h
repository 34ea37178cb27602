// integrity.h — read an artifact's files and prove they are the ones its manifest names.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "files.h"
#include "manifest.h"

namespace gpt {

std::string sha256_hex(const unsigned char *data, size_t size);

// Reads every file listed in the manifest and checks its size and sha256.
// The returned bytes are the verified ones: nothing is read from disk again,
// so a file swapped after the check is never used. Throws GPT_ERR_ARTIFACT_HASH
// (or _INVALID for a missing file).
std::map<std::string, Bytes> read_verified_files(const std::filesystem::path &dir, const Manifest &manifest);

}  // namespace gpt
