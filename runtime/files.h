// files.h — the few file operations the runtime needs, on POSIX calls.
// Why not std::filesystem: libtorch.so exports a partial copy of it that the
// dynamic linker may pick over libstdc++'s, and its remove_all crashes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpt {

using Bytes = std::vector<unsigned char>;

// Size of a regular file, or nullopt if `path` is not one.
std::optional<uint64_t> regular_file_size(const std::string &path);

// Names of the sub-directories of `path`, sorted; empty if `path` is no directory.
std::vector<std::string> list_subdirectories(const std::string &path);

// The file's bytes, but never more than max_bytes + 1 of them: a longer result
// means the file is larger than the caller allows (or grew since it was
// measured), whatever it holds. Throws GPT_ERR_ARTIFACT_INVALID naming the path
// if it cannot be read.
Bytes read_file(const std::string &path, uint64_t max_bytes);

// Replaces `path` with `bytes` so that `path` is always either the old or the new
// content: write a temporary file beside it, fsync, rename, fsync the directory.
// On failure the temporary file is removed and `path` is untouched (GPT_ERR_IO).
void write_file_atomically(const std::string &path, const Bytes &bytes);

// A directory only this process can write (mode 0700), removed with its files at scope exit.
class PrivateTempDir {
public:
    PrivateTempDir();
    ~PrivateTempDir();
    PrivateTempDir(const PrivateTempDir &) = delete;
    PrivateTempDir &operator=(const PrivateTempDir &) = delete;

    const std::string &path() const { return path_; }
    // Writes `name` inside the directory and returns its full path.
    std::string write(const std::string &name, const Bytes &bytes);

private:
    std::string path_;
    std::vector<std::string> files_;
};

}  // namespace gpt
