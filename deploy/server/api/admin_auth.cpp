// admin_auth.cpp — see admin_auth.h.
#include "api/admin_auth.h"

#include <fcntl.h>
#include <sodium.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace server {

namespace {

constexpr size_t kMaxTokenFileBytes = 4096;
constexpr size_t kMinTokenChars = 16;
constexpr const char *kRealm = "Bearer realm=\"gpt-server admin\"";

std::runtime_error token_error(const std::string &path, const std::string &what) {
    return std::runtime_error("admin token file '" + path + "' " + what);
}

std::string read_token(const std::string &path) {
    struct File {
        int fd;
        ~File() {
            if (fd >= 0) ::close(fd);
        }
    } file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
    const int fd = file.fd;
    if (fd < 0) throw token_error(path, std::string("cannot be opened: ") + std::strerror(errno));
    struct stat st {};
    // The opened file's own mode, not a path's that may have changed since.
    if (::fstat(fd, &st) != 0) throw token_error(path, std::string("cannot be read: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw token_error(path, "is not a regular file");
    if ((st.st_mode & 077) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        throw token_error(path, std::string("has mode ") + mode +
                                    ": group and others may use it (chmod 600 it, readable by the server's user only)");
    }
    if (static_cast<uint64_t>(st.st_size) > kMaxTokenFileBytes)
        throw token_error(path, "is larger than " + std::to_string(kMaxTokenFileBytes) + " bytes");
    std::string text(kMaxTokenFileBytes + 1, '\0');
    size_t size = 0;
    while (size < text.size()) {
        const ssize_t n = ::read(fd, text.data() + size, text.size() - size);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw token_error(path, std::string("cannot be read: ") + std::strerror(errno));
        if (n == 0) break;
        size += static_cast<size_t>(n);
    }
    if (size > kMaxTokenFileBytes)
        throw token_error(path, "is larger than " + std::to_string(kMaxTokenFileBytes) + " bytes");
    text.resize(size);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
        text.pop_back();  // `echo TOKEN > file` leaves a newline that is not part of the token
    if (text.empty()) throw token_error(path, "is empty");
    for (const char c : text)
        if (c < 0x21 || c > 0x7e)
            throw token_error(path, "holds a space or control character: a bearer token is one printable word");
    if (text.size() < kMinTokenChars)
        throw token_error(path, "holds fewer than " + std::to_string(kMinTokenChars) +
                                    " characters (make one with `openssl rand -hex 32`)");
    return text;
}

std::array<uint8_t, 32> digest(const std::string &token) {
    std::array<uint8_t, 32> out{};
    crypto_generichash(out.data(), out.size(), reinterpret_cast<const unsigned char *>(token.data()), token.size(),
                       nullptr, 0);
    return out;
}

// realpath(3): every symbolic link and `..` resolved; false (errno set) when a component is missing.
bool real_path(const std::string &path, std::string *out) {
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr) return false;
    *out = resolved;
    return true;
}

}  // namespace

AdminAccess::AdminAccess(const std::string &token_file, const std::string &models_root) {
    if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
    token_digest_ = digest(read_token(token_file));
    if (!real_path(models_root, &models_root_))
        throw std::runtime_error("models root '" + models_root + "' cannot be resolved: " + std::strerror(errno));
    struct stat st {};
    if (::stat(models_root_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw std::runtime_error("models root '" + models_root + "' is not a directory");
}

AdminVerdict AdminAccess::authorize(const http::Request &req) const {
    if (!req.from_loopback) return {403, "admin endpoints answer loopback clients only", ""};
    const std::string header = req.header("Authorization");
    if (header.empty())
        return {401, "admin endpoints need 'Authorization: Bearer <token>' (the token in --admin-token-file)", kRealm};
    static const std::string scheme = "bearer ";
    const bool bearer =
        header.size() > scheme.size() && strncasecmp(header.c_str(), scheme.c_str(), scheme.size()) == 0;
    const size_t start = bearer ? header.find_first_not_of(' ', scheme.size()) : std::string::npos;
    const std::string presented = start == std::string::npos ? "" : header.substr(start);
    const std::array<uint8_t, 32> presented_digest = digest(presented);
    if (presented.empty() || sodium_memcmp(presented_digest.data(), token_digest_.data(), token_digest_.size()) != 0)
        return {401, "the admin token is wrong", std::string(kRealm) + ", error=\"invalid_token\""};
    return {};
}

AdminVerdict AdminAccess::resolve_model_path(const std::string &requested, std::string *resolved) const {
    if (requested.find('\0') != std::string::npos) return {400, "the path holds a NUL byte: no file name has one", ""};
    const std::string path = !requested.empty() && requested[0] == '/' ? requested : models_root_ + "/" + requested;
    std::string real;
    if (!real_path(path, &real)) return {400, "cannot resolve '" + requested + "': " + std::strerror(errno), ""};
    const bool inside = real == models_root_ ||
                        (real.size() > models_root_.size() && real.compare(0, models_root_.size(), models_root_) == 0 &&
                         (models_root_ == "/" || real[models_root_.size()] == '/'));
    if (!inside)
        return {403, "'" + requested + "' resolves to '" + real + "', outside the models root '" + models_root_ + "'",
                ""};
    *resolved = real;
    return {};
}

}  // namespace server
