// signature.h — Ed25519 signatures over manifest.json (libsodium).
//
// `python -m gpt_aot sign` writes manifest.sig beside manifest.json: a detached
// signature over the manifest's exact bytes, whose sha256 entries cover every
// other file. So one check of manifest.sig, before anything else is parsed or
// loaded, vouches for the whole artifact.
//
// Key files are one line of text (formats in docs/SECURITY.md):
//   public: "ed25519-public:<64 hex digits>"    secret: "ed25519-secret:<64 hex digits of the seed>"
// A key's id is the first 16 hex digits of the sha256 of its 32 public-key bytes.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "formats/files.h"

namespace gpt {

inline constexpr const char *kSignatureFile = "manifest.sig";
inline constexpr const char *kTrustedKeysEnv = "GPT_TRUSTED_KEYS";

struct PublicKey {
    std::string id;  // 16 lowercase hex digits
    std::array<unsigned char, 32> bytes{};
};

// A public key file's text -> key. GPT_ERR_INVALID_ARGUMENT naming `what` if malformed.
PublicKey parse_public_key(const std::string &text, const std::string &what);

// The trusted keys named by `option` (a key file, or a directory whose *.pub
// files are all read), or by $GPT_TRUSTED_KEYS when `option` is NULL.
// Neither set (`option` NULL, the variable absent): no keys, and signatures are
// not checked. Set but empty ("" either way), or a path that yields no key
// (missing, unreadable, malformed, a directory without *.pub files), is
// GPT_ERR_INVALID_ARGUMENT naming the setting or the path, never a silent "off".
std::vector<PublicKey> load_trusted_keys(const char *option);

// Checks manifest.sig's text against `manifest` (the exact manifest.json bytes)
// and `trusted`. Returns the id of the key that signed it. Throws
// GPT_ERR_ARTIFACT_SIGNATURE when the signature file is malformed, names an
// untrusted key, or does not verify.
std::string verify_manifest_signature(const std::string &signature_text, const Bytes &manifest,
                                      const std::vector<PublicKey> &trusted);

}  // namespace gpt
