// files.cpp — POSIX implementations for files.h.
#include "formats/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/error.h"

namespace gpt {

std::optional<uint64_t> regular_file_size(const std::string &path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    return static_cast<uint64_t>(st.st_size);
}

namespace {

constexpr const char *kSymlinkPhrase =
    "is a symbolic link: an artifact's files must be regular files inside its directory (copy the file "
    "itself there)";

// What a file that is not a regular one is, as a phrase that follows its name; "" for a regular file.
std::string not_regular_phrase(mode_t mode) {
    if (S_ISREG(mode)) return "";
    if (S_ISLNK(mode)) return kSymlinkPhrase;
    if (S_ISDIR(mode)) return "is a directory, not a file";
    if (S_ISFIFO(mode)) return "is a FIFO, not a regular file";
    if (S_ISSOCK(mode)) return "is a socket, not a regular file";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device, not a regular file";
    return "is not a regular file";
}

int open_flags(Links links) {
    // O_NONBLOCK so that a FIFO in the file's place is refused instead of blocking the open; on a regular
    // file it changes nothing. O_NOFOLLOW: a link put in the file's place after it was examined fails the open.
    return O_RDONLY | O_CLOEXEC | O_NONBLOCK | (links == Links::refuse ? O_NOFOLLOW : 0);
}

}  // namespace

std::string unreadable_reason(const std::string &path, Links links) {
    struct stat st {};
    if ((links == Links::refuse ? ::lstat(path.c_str(), &st) : ::stat(path.c_str(), &st)) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return "is missing";
        if (errno == EACCES)
            return std::string("cannot be reached: ") + std::strerror(EACCES) +
                   " (every directory above it must be searchable by this process's user, e.g. mode 0755)";
        return std::string("cannot be examined: ") + std::strerror(errno);
    }
    if (std::string phrase = not_regular_phrase(st.st_mode); !phrase.empty()) return phrase;
    const int fd = ::open(path.c_str(), open_flags(links));
    if (fd < 0) {
        if (errno == ELOOP && links == Links::refuse) return kSymlinkPhrase;
        if (errno == EACCES || errno == EPERM)
            return "exists but this process (uid " + std::to_string(::geteuid()) +
                   ") may not read it: " + std::strerror(errno) +
                   " (artifact files are meant to be 0644, directories 0755)";
        return std::string("cannot be opened: ") + std::strerror(errno);
    }
    ::close(fd);
    return "";
}

bool path_exists(const std::string &path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string &path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::optional<std::vector<std::string>> list_directory(
    const std::string &path, const std::function<bool(const std::string &name, bool is_directory)> &keep) {
    const std::unique_ptr<DIR, int (*)(DIR *)> dir(::opendir(path.c_str()), ::closedir);
    if (!dir) return std::nullopt;
    std::vector<std::string> names;
    while (const dirent *entry = ::readdir(dir.get())) {
        const std::string name = entry->d_name;
        if (name != "." && name != ".." && keep(name, is_directory(path + "/" + name))) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
}

namespace {

// Opens a regular file for reading and measures it; `what` names it in messages.
int open_regular_file(const std::string &path, const std::string &what, uint64_t *size, Links links) {
    const int fd = ::open(path.c_str(), open_flags(links));
    if (fd < 0) {
        if (errno == ELOOP && links == Links::refuse) fail(GPT_ERR_ARTIFACT_INVALID, what + " " + kSymlinkPhrase);
        fail(GPT_ERR_ARTIFACT_INVALID, "cannot open " + what + ": " + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(GPT_ERR_ARTIFACT_INVALID, what + " " + not_regular_phrase(st.st_mode));  // st_mode 0 if fstat failed
    }
    *size = static_cast<uint64_t>(st.st_size);
    return fd;
}

}  // namespace

Bytes read_file(const std::string &path, uint64_t max_bytes, Links links) {
    uint64_t size = 0;
    const int fd = open_regular_file(path, "'" + path + "'", &size, links);
    Bytes bytes;
    bytes.reserve(std::min<uint64_t>(size, max_bytes + 1));
    unsigned char chunk[1 << 16];
    while (bytes.size() <= max_bytes) {
        const uint64_t room = max_bytes - bytes.size() + 1;
        const ssize_t n = ::read(fd, chunk, static_cast<size_t>(std::min<uint64_t>(sizeof chunk, room)));
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd);
            fail(GPT_ERR_ARTIFACT_INVALID, "cannot read '" + path + "': " + std::strerror(err));
        }
        bytes.insert(bytes.end(), chunk, chunk + n);
    }
    ::close(fd);
    return bytes;
}

FileReader::FileReader(const std::string &path, std::string what, gpt_status changed, Links links)
    : what_(std::move(what)), changed_(changed) {
    fd_ = open_regular_file(path, what_, &size_, links);
}

FileReader::~FileReader() { ::close(fd_); }

void FileReader::changed() const { fail(changed_, what_ + " changed while being read"); }

void FileReader::check_not_failed() const {
    if (!read_error_.empty()) fail(GPT_ERR_ARTIFACT_INVALID, read_error_);
}

void FileReader::read(unsigned char *out, uint64_t n) {
    check_not_failed();
    if (n > remaining()) changed();  // callers ask only for what the measured size allows
    for (uint64_t done = 0; done < n;) {
        const ssize_t got = ::read(fd_, out + done, static_cast<size_t>(std::min<uint64_t>(n - done, 1u << 30)));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            // Kept, so that a later finish() reports the failed read rather than a file that seems to have changed.
            read_error_ = "cannot read " + what_ + ": " + std::strerror(errno);
            fail(GPT_ERR_ARTIFACT_INVALID, read_error_);
        }
        if (got == 0) changed();  // shorter than when it was opened
        done += static_cast<uint64_t>(got);
        offset_ += static_cast<uint64_t>(got);
    }
}

void FileReader::finish() {
    check_not_failed();
    std::vector<unsigned char> chunk(std::min<uint64_t>(remaining(), 1u << 20));
    while (remaining() > 0) read(chunk.data(), std::min<uint64_t>(remaining(), chunk.size()));
    unsigned char extra = 0;
    ssize_t got = 0;
    do {
        got = ::read(fd_, &extra, 1);
    } while (got < 0 && errno == EINTR);
    if (got != 0) changed();  // longer than when it was opened
}

namespace {

void write_all(int fd, const unsigned char *data, size_t size, const std::string &what) {
    size_t done = 0;
    while (done < size) {
        const ssize_t n = ::write(fd, data + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail(GPT_ERR_IO, "cannot write '" + what + "': " + std::strerror(n < 0 ? errno : ENOSPC));
        done += static_cast<size_t>(n);
    }
}

std::string parent_dir(const std::string &path) {
    const size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void write_file_atomically(const std::string &path, const std::function<void(const ByteSink &put)> &produce) {
    std::string tmp = path + ".tmp.XXXXXX";
    int fd = ::mkstemp(tmp.data());
    if (fd < 0) fail(GPT_ERR_IO, "cannot create a temporary file beside '" + path + "': " + std::strerror(errno));
    try {
        produce([&](const unsigned char *data, size_t size) { write_all(fd, data, size, tmp); });
        if (::fsync(fd) != 0) fail(GPT_ERR_IO, "cannot flush '" + tmp + "': " + std::strerror(errno));
        const int closed = ::close(fd);
        fd = -1;  // released even when close fails: never close it twice
        if (closed != 0) fail(GPT_ERR_IO, "cannot close '" + tmp + "': " + std::strerror(errno));
    } catch (...) {
        if (fd >= 0) ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        fail(GPT_ERR_IO, "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(err));
    }
    // The rename is durable only once the directory entry is on disk.
    const int dir = ::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        ::fsync(dir);
        ::close(dir);
    }
}

PrivateTempDir::PrivateTempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/gpt_runtime.XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr)
        fail(GPT_ERR_IO, "cannot create a temporary directory like " + templ + ": " + std::strerror(errno));
    path_ = templ;
}

PrivateTempDir::~PrivateTempDir() {
    for (const auto &f : files_) ::unlink(f.c_str());
    ::rmdir(path_.c_str());
}

std::string PrivateTempDir::write(const std::string &name, const Bytes &bytes) {
    std::string file = path_ + "/" + name;
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) fail(GPT_ERR_IO, "cannot create '" + file + "': " + std::strerror(errno));
    files_.push_back(file);
    try {
        write_all(fd, bytes.data(), bytes.size(), file);
    } catch (...) {
        ::close(fd);
        throw;
    }
    if (::close(fd) != 0) fail(GPT_ERR_IO, "cannot write '" + file + "': " + std::strerror(errno));
    return file;
}

}  // namespace gpt
