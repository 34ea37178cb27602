// files.h — the few file operations the runtime needs, on POSIX calls.
// Why not std::filesystem: libtorch.so exports a partial copy of it that the
// dynamic linker may pick over libstdc++'s, and its remove_all crashes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpt_runtime.h"

namespace gpt {

using Bytes = std::vector<unsigned char>;

// Whether the last component of a path may be a symbolic link. An artifact's files (manifest.json,
// manifest.sig, every listed file) must be regular files inside its directory: `refuse` (lstat, O_NOFOLLOW),
// so a link cannot make the runtime read a file from elsewhere. Paths an operator names (key files,
// checkpoints) may be links: `follow`.
enum class Links { follow, refuse };

// Size of a regular file, or nullopt if `path` is not one.
std::optional<uint64_t> regular_file_size(const std::string &path);

// Why `path` cannot be read as a regular file by this process, as a phrase that
// follows the file's name ("is missing", "is a directory, not a file", "is a FIFO, not a regular file",
// "is a symbolic link: ..." (with Links::refuse), "exists but this process may not read it: ...");
// "" when it can be read. Never blocks: a FIFO is named, not opened for a writer.
std::string unreadable_reason(const std::string &path, Links links);
// Whether `path` exists at all (as anything, even where it cannot be read).
bool path_exists(const std::string &path);

// Whether `path` is a directory (following links).
bool is_directory(const std::string &path);

// The names in directory `path` (neither "." nor "..") that `keep(name, is_directory)` accepts,
// sorted so that nothing depends on the file system's order; nullopt if `path` cannot be listed.
std::optional<std::vector<std::string>> list_directory(
    const std::string &path, const std::function<bool(const std::string &name, bool is_directory)> &keep);

// The file's bytes, but never more than max_bytes + 1 of them: a longer result
// means the file is larger than the caller allows (or grew since it was
// measured), whatever it holds. Throws GPT_ERR_ARTIFACT_INVALID naming the path
// and what it is if it cannot be read or is not a regular file (a link, with Links::refuse).
Bytes read_file(const std::string &path, uint64_t max_bytes, Links links);

// Reads a file front to back in pieces the caller places (the tensors of a
// safetensors file straight into their storage): the file's bytes are never
// held whole beside what is made of them. The file must stay the size it had
// when opened; one that shrinks or grows while read fails with `changed`.
// Cannot open or read, or not a regular file: GPT_ERR_ARTIFACT_INVALID. `what` names it in messages.
class FileReader {
public:
    FileReader(const std::string &path, std::string what, gpt_status changed, Links links);
    virtual ~FileReader();
    FileReader(const FileReader &) = delete;
    FileReader &operator=(const FileReader &) = delete;

    const std::string &what() const { return what_; }
    uint64_t size() const { return size_; }
    uint64_t remaining() const { return size_ - offset_; }
    // Reads exactly `n` bytes, n <= remaining(). After a failed read, every call repeats that failure.
    virtual void read(unsigned char *out, uint64_t n);
    // Reads whatever is left, keeping nothing, and checks that the file ends there.
    virtual void finish();

private:
    [[noreturn]] void changed() const;
    void check_not_failed() const;
    std::string what_;
    gpt_status changed_;
    std::string read_error_;  // set once a read fails: the reader is unusable from then on
    int fd_ = -1;
    uint64_t size_ = 0, offset_ = 0;
};

// Where a writer puts its bytes, piece by piece.
using ByteSink = std::function<void(const unsigned char *data, size_t size)>;

// Replaces `path` with what `produce` puts in it, so that `path` is always
// either the old or the new content: write a temporary file beside it, fsync,
// rename, fsync the directory. On failure (GPT_ERR_IO, or whatever `produce`
// throws) the temporary file is removed and `path` is untouched.
void write_file_atomically(const std::string &path, const std::function<void(const ByteSink &put)> &produce);

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
