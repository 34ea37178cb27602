// integrity.cpp — sha256 (libsodium) over every artifact file before any of it is used.
#include "formats/integrity.h"

#include <sodium.h>

#include "base/error.h"
#include "base/log.h"

namespace gpt {

namespace {

void init_sodium() {
    if (sodium_init() < 0) fail(GPT_ERR_INTERNAL, "libsodium failed to initialise");
}

std::string hex_of(const unsigned char (&digest)[crypto_hash_sha256_BYTES]) {
    static const char kHex[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(sizeof digest * 2);
    for (unsigned char b : digest) {
        hex.push_back(kHex[b >> 4]);
        hex.push_back(kHex[b & 15]);
    }
    return hex;
}

// The path of a file the manifest lists, which must exist: a missing one is an incomplete copy, not corruption.
// It must be a regular file in `dir`, not a link to one: a link would let the artifact read any file.
std::string listed_path(const std::filesystem::path &dir, const Manifest &manifest, const std::string &name) {
    if (manifest.files.count(name) == 0) fail(GPT_ERR_ARTIFACT_INVALID, "the manifest does not list '" + name + "'");
    std::string path = (dir / name).string();
    const std::string reason = unreadable_reason(path, Links::refuse);
    if (reason == "is missing")
        fail(GPT_ERR_ARTIFACT_INVALID, "artifact file '" + path + "' is missing: copy the whole artifact directory");
    if (!reason.empty()) fail(GPT_ERR_ARTIFACT_INVALID, "artifact file '" + path + "' " + reason);
    return path;
}

}  // namespace

std::string sha256_hex(const unsigned char *data, size_t size) {
    init_sodium();
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(digest, data, size);
    return hex_of(digest);
}

struct ListedFileReader::Hash {
    crypto_hash_sha256_state state;
};

ListedFileReader::ListedFileReader(const std::filesystem::path &dir, const Manifest &manifest, const std::string &name)
    : FileReader(listed_path(dir, manifest, name), "artifact file '" + name + "'", GPT_ERR_ARTIFACT_HASH,
                 Links::refuse),
      name_(name),
      entry_(manifest.files.at(name)),
      hash_(std::make_unique<Hash>()) {
    if (size() != entry_.size)
        fail(GPT_ERR_ARTIFACT_HASH, "artifact file '" + name + "' is " + std::to_string(size()) +
                                        " bytes, the manifest says " + std::to_string(entry_.size) +
                                        ": the artifact is truncated or modified; copy it again");
    init_sodium();
    crypto_hash_sha256_init(&hash_->state);
}

ListedFileReader::~ListedFileReader() = default;

void ListedFileReader::read(unsigned char *out, uint64_t n) {
    FileReader::read(out, n);
    crypto_hash_sha256_update(&hash_->state, out, n);
}

void ListedFileReader::finish() {
    FileReader::finish();
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&hash_->state, digest);
    const std::string actual = hex_of(digest);
    if (actual != entry_.sha256)
        fail(GPT_ERR_ARTIFACT_HASH, "sha256 of '" + name_ + "' is " + actual + ", the manifest says " + entry_.sha256 +
                                        ": the artifact is corrupt or was modified; nothing was loaded");
    log(GPT_LOG_DEBUG, "verified " + name_ + " (" + std::to_string(entry_.size) + " bytes)");
}

std::map<std::string, Bytes> read_verified_files(const std::filesystem::path &dir, const Manifest &manifest,
                                                 const std::set<std::string> &streamed) {
    std::map<std::string, Bytes> files;
    for (const auto &listed : manifest.files) {
        if (streamed.count(listed.first) != 0) continue;
        ListedFileReader file(dir, manifest, listed.first);
        Bytes bytes(file.size());
        file.read(bytes.data(), bytes.size());
        file.finish();
        files.emplace(listed.first, std::move(bytes));
    }
    return files;
}

void verify_files(const std::filesystem::path &dir, const Manifest &manifest) {
    for (const auto &listed : manifest.files) ListedFileReader(dir, manifest, listed.first).finish();
}

}  // namespace gpt
