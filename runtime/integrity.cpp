// integrity.cpp — sha256 (libsodium) over every artifact file before any of it is used.
#include "integrity.h"

#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "error.h"
#include "log.h"

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

[[noreturn]] void changed_while_read(const std::string &name) {
    fail(GPT_ERR_ARTIFACT_HASH, "artifact file '" + name + "' changed while being read");
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
    : name_(name), hash_(std::make_unique<Hash>()) {
    const auto listed = manifest.files.find(name);
    if (listed == manifest.files.end()) fail(GPT_ERR_ARTIFACT_INVALID, "the manifest does not list '" + name + "'");
    entry_ = listed->second;
    const std::string path = (dir / name).string();
    const auto size = regular_file_size(path);
    if (!size)
        fail(GPT_ERR_ARTIFACT_INVALID, "artifact file '" + path + "' is missing: copy the whole artifact directory");
    if (*size != entry_.size)
        fail(GPT_ERR_ARTIFACT_HASH, "artifact file '" + name + "' is " + std::to_string(*size) +
                                        " bytes, the manifest says " + std::to_string(entry_.size) +
                                        ": the artifact is truncated or modified; copy it again");
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail(GPT_ERR_ARTIFACT_INVALID, "cannot open '" + path + "': " + std::strerror(errno));
    init_sodium();
    crypto_hash_sha256_init(&hash_->state);
}

ListedFileReader::~ListedFileReader() {
    if (fd_ >= 0) ::close(fd_);
}

void ListedFileReader::read(unsigned char *out, uint64_t n) {
    if (n > remaining()) changed_while_read(name_);  // callers ask only for what the manifest's size allows
    for (uint64_t done = 0; done < n;) {
        const ssize_t got = ::read(fd_, out + done, static_cast<size_t>(std::min<uint64_t>(n - done, 1u << 30)));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) fail(GPT_ERR_ARTIFACT_INVALID, "cannot read '" + name_ + "': " + std::strerror(errno));
        if (got == 0) changed_while_read(name_);  // shorter than when it was measured
        done += static_cast<uint64_t>(got);
    }
    crypto_hash_sha256_update(&hash_->state, out, n);
    offset_ += n;
}

void ListedFileReader::finish() {
    std::vector<unsigned char> chunk(std::min<uint64_t>(remaining(), 1u << 20));
    while (remaining() > 0) read(chunk.data(), std::min<uint64_t>(remaining(), chunk.size()));
    unsigned char extra = 0;
    ssize_t got = 0;
    do {
        got = ::read(fd_, &extra, 1);
    } while (got < 0 && errno == EINTR);
    if (got != 0) changed_while_read(name_);  // longer than when it was measured
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
