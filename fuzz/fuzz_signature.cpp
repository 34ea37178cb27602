// fuzz_signature.cpp — manifest.sig and public key files into the signature
// checks (runtime/formats/signature.cpp). The manifest and the one trusted key are
// fixed, so no input can carry a valid signature except one made with the
// fixed key's secret, which is not in this program.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "formats/signature.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        const gpt::PublicKey key = gpt::parse_public_key(text, "fuzz.pub");
        FUZZ_CHECK(key.id.size() == 16);
    } catch (const gpt::Error &e) {
        FUZZ_CHECK(e.status() == GPT_ERR_INVALID_ARGUMENT);
    }
    static const gpt::PublicKey trusted = gpt::parse_public_key(
        "ed25519-public:d02be7a3351aca64a89c304c9415f1702a2cba3b7ec868511a43b8661bb14b3a", "trusted.pub");
    static const gpt::Bytes manifest = {'{', '}'};
    try {
        gpt::verify_manifest_signature(text, manifest, {trusted});
        FUZZ_CHECK(false);  // a forgery
    } catch (const gpt::Error &e) {
        FUZZ_CHECK(e.status() == GPT_ERR_ARTIFACT_SIGNATURE);
    }
    return 0;
}
