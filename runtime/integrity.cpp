// integrity.cpp — sha256 (libsodium) over every artifact file before anything is loaded.
#include "integrity.h"

#include <sodium.h>

#include "error.h"
#include "log.h"

namespace gpt {

std::string sha256_hex(const unsigned char *data, size_t size) {
    if (sodium_init() < 0) fail(GPT_ERR_INTERNAL, "libsodium failed to initialise");
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(digest, data, size);
    static const char kHex[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(2 * sizeof digest);
    for (unsigned char b : digest) {
        hex.push_back(kHex[b >> 4]);
        hex.push_back(kHex[b & 15]);
    }
    return hex;
}

namespace {

Bytes read_exact(const std::filesystem::path &path, uint64_t expected_size) {
    const auto size = regular_file_size(path.string());
    if (!size)
        fail(GPT_ERR_ARTIFACT_INVALID,
             "artifact file '" + path.string() + "' is missing: copy the whole artifact directory");
    if (*size != expected_size)
        fail(GPT_ERR_ARTIFACT_HASH, "artifact file '" + path.filename().string() + "' is " + std::to_string(*size) +
                                        " bytes, the manifest says " + std::to_string(expected_size) +
                                        ": the artifact is truncated or modified; copy it again");
    Bytes bytes = read_file(path.string(), expected_size);
    if (bytes.size() != expected_size)  // changed while being read
        fail(GPT_ERR_ARTIFACT_HASH, "artifact file '" + path.filename().string() + "' changed while being read");
    return bytes;
}

}  // namespace

std::map<std::string, Bytes> read_verified_files(const std::filesystem::path &dir, const Manifest &manifest) {
    std::map<std::string, Bytes> files;
    for (const auto &[name, entry] : manifest.files) {
        Bytes bytes = read_exact(dir / name, entry.size);
        const std::string actual = sha256_hex(bytes.data(), bytes.size());
        if (actual != entry.sha256)
            fail(GPT_ERR_ARTIFACT_HASH, "sha256 of '" + name + "' is " + actual + ", the manifest says " +
                                            entry.sha256 +
                                            ": the artifact is corrupt or was modified; nothing was loaded");
        log(GPT_LOG_DEBUG, "verified " + name + " (" + std::to_string(bytes.size()) + " bytes)");
        files.emplace(name, std::move(bytes));
    }
    return files;
}

}  // namespace gpt
