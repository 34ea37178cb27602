// integrity.h — read an artifact's files and prove they are the ones its manifest names.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "formats/files.h"
#include "formats/manifest.h"

namespace gpt {

std::string sha256_hex(const unsigned char *data, size_t size);

// One file the manifest lists, read front to back with every byte hashed on the
// way, so a caller can read it straight into its final place (the weights into
// their tensors) and the bytes it keeps are the bytes that were checked.
// Opening checks that the file exists (GPT_ERR_ARTIFACT_INVALID) with the
// manifest's size (GPT_ERR_ARTIFACT_HASH); finish() checks that it was read
// whole and that its sha256 is the manifest's (GPT_ERR_ARTIFACT_HASH). Nothing
// read may be used before finish() returns.
class ListedFileReader : public FileReader {
public:
    ListedFileReader(const std::filesystem::path &dir, const Manifest &manifest, const std::string &name);
    ~ListedFileReader() override;

    void read(unsigned char *out, uint64_t n) override;
    void finish() override;

private:
    struct Hash;
    std::string name_;
    FileEntry entry_;
    std::unique_ptr<Hash> hash_;
};

// Reads every file listed in the manifest, except those in `streamed` (read by
// their loaders through ListedFileReader), and checks its size and sha256.
// The returned bytes are the verified ones: nothing is read from disk again,
// so a file swapped after the check is never used. Throws GPT_ERR_ARTIFACT_HASH
// (or _INVALID for a missing file).
std::map<std::string, Bytes> read_verified_files(const std::filesystem::path &dir, const Manifest &manifest,
                                                 const std::set<std::string> &streamed = {});

// Checks the size and sha256 of every listed file, holding at most a small buffer of each.
void verify_files(const std::filesystem::path &dir, const Manifest &manifest);

}  // namespace gpt
