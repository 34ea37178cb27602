// signature.cpp — trusted keys and the manifest.sig check (libsodium Ed25519).
#include "formats/signature.h"

#include <sodium.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>

#include "base/error.h"
#include "formats/files.h"
#include "formats/integrity.h"

namespace gpt {

namespace {

constexpr const char *kPublicKeyPrefix = "ed25519-public:";
constexpr const char *kSignatureFormat = "gpt-aot-signature";
constexpr size_t kMaxKeyFileBytes = 4096;
constexpr size_t kMaxKeys = 256;

// Exactly 2 * size lowercase or uppercase hex digits -> bytes; false otherwise.
bool decode_hex(const std::string &hex, unsigned char *out, size_t size) {
    if (hex.size() != 2 * size) return false;
    auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    for (size_t i = 0; i < size; ++i) {
        const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = static_cast<unsigned char>(hi << 4 | lo);
    }
    return true;
}

std::string trim(const std::string &s) {
    const size_t begin = s.find_first_not_of(" \t\r\n");
    if (begin == std::string::npos) return "";
    return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

std::string read_key_file(const std::string &path) {
    if (!regular_file_size(path)) fail(GPT_ERR_INVALID_ARGUMENT, "trusted key file '" + path + "' does not exist");
    const Bytes bytes = read_file(path, kMaxKeyFileBytes, Links::follow);  // an operator's path: links are theirs
    if (bytes.size() > kMaxKeyFileBytes)
        fail(GPT_ERR_INVALID_ARGUMENT, "'" + path + "' is too large to be a public key");
    return std::string(bytes.begin(), bytes.end());
}

// The *.pub files of `dir`, sorted so the load order does not depend on the file system.
std::vector<std::string> public_key_files(const std::string &dir) {
    const auto names = list_directory(dir, [](const std::string &name, bool) {
        return name.size() > 4 && name.compare(name.size() - 4, 4, ".pub") == 0;
    });
    if (!names) fail(GPT_ERR_INVALID_ARGUMENT, "cannot list trusted key directory '" + dir + "'");
    std::vector<std::string> files;
    for (const std::string &name : *names) files.push_back(dir + "/" + name);
    return files;
}

[[noreturn]] void bad_signature(const std::string &why) {
    fail(GPT_ERR_ARTIFACT_SIGNATURE, std::string(kSignatureFile) + ": " + why +
                                         "; nothing was loaded. Obtain the artifact from its publisher " +
                                         "again, or sign it with `python -m gpt_aot sign` and a key you trust");
}

}  // namespace

PublicKey parse_public_key(const std::string &text, const std::string &what) {
    const std::string line = trim(text);
    const std::string prefix = kPublicKeyPrefix;
    PublicKey key;
    if (line.compare(0, prefix.size(), prefix) != 0 ||
        !decode_hex(line.substr(prefix.size()), key.bytes.data(), key.bytes.size()))
        fail(GPT_ERR_INVALID_ARGUMENT,
             "'" + what + "' is not a public key: expected one line '" + prefix + "<64 hex digits>'");
    key.id = sha256_hex(key.bytes.data(), key.bytes.size()).substr(0, 16);
    return key;
}

std::vector<PublicKey> load_trusted_keys(const char *option) {
    // Set but empty is a mistake in the configuration, never a request to turn signatures off.
    std::string path;
    if (option != nullptr) {
        path = option;
        if (path.empty())
            fail(GPT_ERR_INVALID_ARGUMENT,
                 "gpt_model_params.trusted_keys is set but empty: name a *.pub key file or a directory of them, "
                 "or leave it NULL to use " +
                     std::string(kTrustedKeysEnv));
    } else {
        const char *env = std::getenv(kTrustedKeysEnv);
        if (env == nullptr) return {};
        path = env;
        if (path.empty())
            fail(GPT_ERR_INVALID_ARGUMENT, std::string(kTrustedKeysEnv) +
                                               " is set but empty: name a *.pub key file or a directory of them, "
                                               "or unset it to load artifacts without checking signatures");
    }
    const std::vector<std::string> files = is_directory(path) ? public_key_files(path) : std::vector{path};
    if (files.empty()) fail(GPT_ERR_INVALID_ARGUMENT, "trusted key directory '" + path + "' holds no *.pub file");
    if (files.size() > kMaxKeys) fail(GPT_ERR_INVALID_ARGUMENT, "more than 256 trusted keys in '" + path + "'");
    std::vector<PublicKey> keys;
    keys.reserve(files.size());
    for (const auto &file : files) keys.push_back(parse_public_key(read_key_file(file), file));
    return keys;
}

std::string verify_manifest_signature(const std::string &signature_text, const Bytes &manifest,
                                      const std::vector<PublicKey> &trusted) {
    if (sodium_init() < 0) fail(GPT_ERR_INTERNAL, "libsodium failed to initialise");
    const auto sig = nlohmann::json::parse(signature_text, nullptr, false);
    if (sig.is_discarded() || !sig.is_object()) bad_signature("not a JSON object");
    auto text_field = [&](const char *key) -> std::string {
        if (!sig.contains(key) || !sig[key].is_string()) bad_signature(std::string("field '") + key + "' is missing");
        return sig[key].get<std::string>();
    };
    if (text_field("format") != kSignatureFormat) bad_signature("'format' is not 'gpt-aot-signature'");
    if (!sig.contains("format_version") || sig["format_version"] != 1) bad_signature("unknown format_version");
    if (text_field("algorithm") != "ed25519") bad_signature("algorithm is not ed25519");
    std::string key_id = text_field("key_id");
    unsigned char signature[crypto_sign_ed25519_BYTES];
    if (!decode_hex(text_field("signature"), signature, sizeof signature))
        bad_signature("'signature' is not 128 hex digits");

    const auto key = std::find_if(trusted.begin(), trusted.end(), [&](const PublicKey &k) { return k.id == key_id; });
    if (key == trusted.end()) bad_signature("signed by key '" + key_id.substr(0, 64) + "', which is not trusted");
    if (crypto_sign_ed25519_verify_detached(signature, manifest.data(), manifest.size(), key->bytes.data()) != 0)
        bad_signature("the signature by key '" + key_id + "' does not match manifest.json");
    return key_id;
}

}  // namespace gpt
