// fuzz_signature.cpp — manifest.sig and public key files into the signature
// checks (runtime/formats/signature.cpp). The first byte picks the mode:
//   1: M = the input after a 4-byte edit (position: 2 bytes LE, kind, value); this
//      program signs M with its own key and verifies that signature over M edited
//      (a byte changed, inserted, removed, the tail cut or a byte appended): it must
//      verify exactly when the edited bytes equal M.
//   2: M = the input after 3 bytes (position, value); this program signs M, flips
//      bits of the signature's byte at `position` by `value`: it must verify exactly
//      when `value` is 0.
//   else: the whole input is a key file and a manifest.sig against a fixed manifest
//      and key: parsed or refused with the right status, never accepted.
#include <sodium.h>

#include <array>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "formats/signature.h"
#include "fuzz_check.h"

namespace {

std::string hex(const unsigned char *data, size_t size) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < size; ++i) out += {digits[data[i] >> 4], digits[data[i] & 15]};
    return out;
}

// A signing key held by this program, and its public half as the one trusted key.
struct Signer {
    std::array<unsigned char, crypto_sign_ed25519_SECRETKEYBYTES> secret{};
    gpt::PublicKey trusted;
    Signer() {
        FUZZ_CHECK(sodium_init() >= 0);
        std::array<unsigned char, crypto_sign_ed25519_SEEDBYTES> seed{};
        seed.fill(42);
        std::array<unsigned char, crypto_sign_ed25519_PUBLICKEYBYTES> pk{};
        crypto_sign_ed25519_seed_keypair(pk.data(), secret.data(), seed.data());
        trusted = gpt::parse_public_key("ed25519-public:" + hex(pk.data(), pk.size()), "signer.pub");
    }
    std::array<unsigned char, crypto_sign_ed25519_BYTES> sign(const gpt::Bytes &m) const {
        std::array<unsigned char, crypto_sign_ed25519_BYTES> sig{};
        crypto_sign_ed25519_detached(sig.data(), nullptr, m.data(), m.size(), secret.data());
        return sig;
    }
    // manifest.sig's text, as `gpt_aot sign` writes it.
    std::string signature_file(const std::array<unsigned char, crypto_sign_ed25519_BYTES> &sig) const {
        return R"({"format": "gpt-aot-signature", "format_version": 1, "algorithm": "ed25519", "key_id": ")" +
               trusted.id + R"(", "signature": ")" + hex(sig.data(), sig.size()) + "\"}";
    }
    // Whether verify_manifest_signature accepts; any refusal must be GPT_ERR_ARTIFACT_SIGNATURE.
    bool verifies(const std::string &signature_text, const gpt::Bytes &manifest) const {
        try {
            FUZZ_CHECK(gpt::verify_manifest_signature(signature_text, manifest, {trusted}) == trusted.id);
            return true;
        } catch (const gpt::Error &e) {
            FUZZ_CHECK(e.status() == GPT_ERR_ARTIFACT_SIGNATURE);
            return false;
        }
    }
};

const Signer &signer() {
    static const Signer s;
    return s;
}

// Mode 1: the signature over M must not verify over any other bytes, and must verify over M.
void edited_manifest(const uint8_t *data, size_t size) {
    if (size < 4) return;
    const gpt::Bytes original(data + 4, data + size);
    const size_t n = original.size();
    const size_t pos = static_cast<size_t>(data[0] | data[1] << 8);
    const uint8_t value = data[3];
    gpt::Bytes edited = original;
    switch (data[2] % 5) {
        case 0:  // change a byte (value 0: unchanged)
            if (n > 0) edited[pos % n] ^= value;
            break;
        case 1:  // insert a byte
            edited.insert(edited.begin() + static_cast<std::ptrdiff_t>(pos % (n + 1)), value);
            break;
        case 2:  // remove a byte
            if (n > 0) edited.erase(edited.begin() + static_cast<std::ptrdiff_t>(pos % n));
            break;
        case 3:  // cut the tail
            edited.resize(pos % (n + 1));
            break;
        default:  // append a byte
            edited.push_back(value);
            break;
    }
    const Signer &s = signer();
    FUZZ_CHECK(s.verifies(s.signature_file(s.sign(original)), edited) == (edited == original));
}

// Mode 2: a signature with any bit changed must not verify.
void edited_signature(const uint8_t *data, size_t size) {
    if (size < 3) return;
    const gpt::Bytes manifest(data + 3, data + size);
    const Signer &s = signer();
    auto sig = s.sign(manifest);
    const size_t pos = static_cast<size_t>(data[0] | data[1] << 8) % sig.size();
    sig[pos] ^= data[2];
    FUZZ_CHECK(s.verifies(s.signature_file(sig), manifest) == (data[2] == 0));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 0 && data[0] == 1) {
        edited_manifest(data + 1, size - 1);
        return 0;
    }
    if (size > 0 && data[0] == 2) {
        edited_signature(data + 1, size - 1);
        return 0;
    }
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        const gpt::PublicKey key = gpt::parse_public_key(text, "fuzz.pub");
        FUZZ_CHECK(key.id.size() == 16);
    } catch (const gpt::Error &e) {
        FUZZ_CHECK(e.status() == GPT_ERR_INVALID_ARGUMENT);
    }
    // A fixed manifest and a key whose secret is not in this program: the signature
    // file's reader refuses every input with GPT_ERR_ARTIFACT_SIGNATURE.
    static const gpt::PublicKey fixed = gpt::parse_public_key(
        "ed25519-public:d02be7a3351aca64a89c304c9415f1702a2cba3b7ec868511a43b8661bb14b3a", "trusted.pub");
    static const gpt::Bytes manifest = {'{', '}'};
    try {
        gpt::verify_manifest_signature(text, manifest, {fixed});
        FUZZ_CHECK(false);
    } catch (const gpt::Error &e) {
        FUZZ_CHECK(e.status() == GPT_ERR_ARTIFACT_SIGNATURE);
    }
    return 0;
}
