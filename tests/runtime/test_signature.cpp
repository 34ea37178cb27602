// Signed artifacts: with trusted keys configured, only an artifact whose
// manifest.sig verifies loads, and every refusal comes before any file is hashed
// or any compiled code is loaded. Without keys, hashes alone are checked and the
// log says that signatures are off.
#include <sodium.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>

#include "test_support.h"

namespace {

using nlohmann::json;

std::string hex(const unsigned char *data, size_t size) {
    std::string out(2 * size + 1, '\0');
    sodium_bin2hex(out.data(), out.size(), data, size);
    out.pop_back();
    return out;
}

std::string slurp(const std::filesystem::path &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// A deterministic Ed25519 key pair, its public key file and its key id.
struct Key {
    unsigned char pk[crypto_sign_ed25519_PUBLICKEYBYTES];
    unsigned char sk[crypto_sign_ed25519_SECRETKEYBYTES];
    std::string id;
    explicit Key(unsigned char seed_byte) {
        REQUIRE(sodium_init() >= 0);
        unsigned char seed[crypto_sign_ed25519_SEEDBYTES];
        std::fill(std::begin(seed), std::end(seed), seed_byte);
        crypto_sign_ed25519_seed_keypair(pk, sk, seed);
        unsigned char digest[crypto_hash_sha256_BYTES];
        crypto_hash_sha256(digest, pk, sizeof pk);
        id = hex(digest, sizeof digest).substr(0, 16);
    }
    void write_public(const std::filesystem::path &path) const {
        std::ofstream(path) << "ed25519-public:" << hex(pk, sizeof pk) << "\n";
    }
    // manifest.sig over the artifact's current manifest.json bytes, as `gpt_aot sign` writes it.
    json signature_for(const test::ScratchArtifact &art) const {
        const std::string manifest = slurp(art.file("manifest.json"));
        unsigned char sig[crypto_sign_ed25519_BYTES];
        crypto_sign_ed25519_detached(sig, nullptr, reinterpret_cast<const unsigned char *>(manifest.data()),
                                     manifest.size(), sk);
        return {{"format", "gpt-aot-signature"},
                {"format_version", 1},
                {"algorithm", "ed25519"},
                {"key_id", id},
                {"signature", hex(sig, sizeof sig)}};
    }
    void sign(const test::ScratchArtifact &art) const {
        std::ofstream(art.file("manifest.sig")) << signature_for(art).dump(2);
    }
};

gpt_status load_with_keys(const std::filesystem::path &dir, const char *trusted_keys) {
    gpt_model_params params;
    gpt_model_default_params(&params, sizeof params);
    params.trusted_keys = trusted_keys;
    gpt_model *model = reinterpret_cast<gpt_model *>(0x1);  // must stay untouched on failure
    const gpt_status s = gpt_model_load(dir.c_str(), &params, &model);
    if (s == GPT_OK) {
        CHECK(gpt_model_free(model) == GPT_OK);
    } else {
        CHECK(model == reinterpret_cast<gpt_model *>(0x1));
    }
    return s;
}

using test::error_mentions;

// A scratch artifact signed by `key`, with `key`'s public file beside it (outside the artifact).
struct SignedArtifact {
    test::ScratchArtifact art{test::artifact()};
    Key key{7};
    std::filesystem::path public_key = art.dir().parent_path() / "release.pub";
    SignedArtifact() {
        key.sign(art);
        key.write_public(public_key);
    }
};

}  // namespace

TEST_CASE("SignedArtifactLoadsWithItsTrustedKey", "[signature]") {
    SignedArtifact s;
    test::LogCapture log;
    CHECK(load_with_keys(s.art.dir(), s.public_key.c_str()) == GPT_OK);
    CHECK(log.saw("signed by trusted key " + s.key.id));
    CHECK_FALSE(log.saw("signatures are off"));
}

TEST_CASE("KeyDirectoryTrustsEveryPublicKeyInIt", "[signature]") {
    SignedArtifact s;
    const auto dir = s.art.dir().parent_path() / "keys";
    std::filesystem::create_directory(dir);
    Key(1).write_public(dir / "a-other.pub");
    s.key.write_public(dir / "b-release.pub");
    std::ofstream(dir / "README") << "not a key, ignored\n";
    CHECK(load_with_keys(s.art.dir(), dir.c_str()) == GPT_OK);
}

TEST_CASE("UnsignedArtifactIsRefusedWhenKeysAreTrusted", "[signature]") {
    SignedArtifact s;
    std::filesystem::remove(s.art.file("manifest.sig"));
    test::LogCapture log;
    CHECK(load_with_keys(s.art.dir(), s.public_key.c_str()) == GPT_ERR_ARTIFACT_SIGNATURE);
    CHECK(error_mentions("not signed"));
    CHECK_FALSE(log.saw("verified "));  // refused before any file was hashed
}

TEST_CASE("SignatureByAnUntrustedKeyIsRefused", "[signature]") {
    SignedArtifact s;
    Key(9).sign(s.art);
    CHECK(load_with_keys(s.art.dir(), s.public_key.c_str()) == GPT_ERR_ARTIFACT_SIGNATURE);
    CHECK(error_mentions("not trusted"));
}

TEST_CASE("ReplacedCompiledCodeWithARehashedManifestIsRefusedBeforeLoad", "[signature]") {
    // The attack hashes alone cannot stop: swap a .pt2 and rewrite its sha256 in the manifest.
    SignedArtifact s;
    {
        std::fstream f(s.art.file("prefill.pt2"), std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(4096);
        f.put('\x7f');
    }
    s.art.rehash("prefill.pt2");
    test::LogCapture log;
    CHECK(load_with_keys(s.art.dir(), s.public_key.c_str()) == GPT_ERR_ARTIFACT_SIGNATURE);
    CHECK(error_mentions("does not match manifest.json"));
    CHECK_FALSE(log.saw("verified "));
    CHECK_FALSE(log.saw("loaded graph"));
    // Without trusted keys the rehashed artifact would pass the hash check: the signature is what caught it.
    CHECK(load_with_keys(s.art.dir(), nullptr) != GPT_ERR_ARTIFACT_HASH);
}

TEST_CASE("CorruptSignatureFilesAreRefused", "[signature]") {
    SignedArtifact s;
    const json good = s.key.signature_for(s.art);
    const std::vector<std::pair<const char *, std::function<std::string()>>> variants = {
        {"flipped signature bit",
         [&] {
             json j = good;
             std::string sig = j["signature"];
             sig[0] = sig[0] == '0' ? '1' : '0';
             j["signature"] = sig;
             return j.dump();
         }},
        {"short signature",
         [&] {
             json j = good;
             j["signature"] = std::string(good["signature"]).substr(2);
             return j.dump();
         }},
        {"non-hex signature",
         [&] {
             json j = good;
             j["signature"] = std::string(128, 'z');
             return j.dump();
         }},
        {"numeric signature",
         [&] {
             json j = good;
             j["signature"] = 5;
             return j.dump();
         }},
        {"other algorithm",
         [&] {
             json j = good;
             j["algorithm"] = "rsa";
             return j.dump();
         }},
        {"other format",
         [&] {
             json j = good;
             j["format"] = "minisign";
             return j.dump();
         }},
        {"future version",
         [&] {
             json j = good;
             j["format_version"] = 2;
             return j.dump();
         }},
        {"no key id",
         [&] {
             json j = good;
             j.erase("key_id");
             return j.dump();
         }},
        {"empty key id",
         [&] {
             json j = good;
             j["key_id"] = "";
             return j.dump();
         }},
        {"truncated JSON", [&] { return good.dump().substr(0, 40); }},
        {"empty file", [] { return std::string(); }},
        {"JSON array", [] { return std::string("[1, 2]"); }},
        {"binary noise", [] { return std::string("\x00\xff\xfe\x01", 4); }},
        {"larger than 4 KiB",
         [&] {
             json j = good;
             j["padding"] = std::string(5000, ' ');
             return j.dump();
         }},
    };
    int refused = 0;
    for (const auto &[what, make] : variants) {
        INFO(what);
        std::ofstream(s.art.file("manifest.sig"), std::ios::binary | std::ios::trunc) << make();
        if (load_with_keys(s.art.dir(), s.public_key.c_str()) == GPT_ERR_ARTIFACT_SIGNATURE) ++refused;
        CHECK(error_mentions("manifest.sig"));
    }
    CHECK(refused == static_cast<int>(variants.size()));
    // The same file, untouched, still loads: each refusal was the variant's doing.
    std::ofstream(s.art.file("manifest.sig"), std::ios::trunc) << good.dump();
    CHECK(load_with_keys(s.art.dir(), s.public_key.c_str()) == GPT_OK);
}

TEST_CASE("ManifestEditedAfterSigningIsRefused", "[signature]") {
    SignedArtifact s;
    auto m = s.art.manifest();
    m["golden"]["atol"] = 1.0;  // a looser tolerance would hide a wrong model
    s.art.write_manifest(m);
    CHECK(load_with_keys(s.art.dir(), s.public_key.c_str()) == GPT_ERR_ARTIFACT_SIGNATURE);
}

TEST_CASE("ManifestSigThatIsNotARegularFileIsRefusedAsWhatItIs", "[signature]") {
    SignedArtifact s;
    const auto sig = s.art.file("manifest.sig");
    const auto outside = s.art.model_dir() / "elsewhere.sig";
    std::filesystem::rename(sig, outside);
    std::filesystem::create_symlink(outside, sig);  // a valid signature, but through a link
    CHECK(load_with_keys(s.art.dir(), s.public_key.c_str()) == GPT_ERR_ARTIFACT_SIGNATURE);
    CHECK(error_mentions("manifest.sig' is a symbolic link"));
    std::filesystem::remove(sig);
    REQUIRE(::mkfifo(sig.c_str(), 0600) == 0);  // nothing writes to it: a blocking open never returns
    CHECK(load_with_keys(s.art.dir(), s.public_key.c_str()) == GPT_ERR_ARTIFACT_SIGNATURE);
    CHECK(error_mentions("manifest.sig' is a FIFO"));
}

TEST_CASE("TrustedKeysFromTheEnvironment", "[signature]") {
    SignedArtifact s;
    test::ScratchArtifact unsigned_art(test::artifact());
    setenv("GPT_TRUSTED_KEYS", s.public_key.c_str(), 1);
    CHECK(load_with_keys(s.art.dir(), nullptr) == GPT_OK);
    CHECK(load_with_keys(unsigned_art.dir(), nullptr) == GPT_ERR_ARTIFACT_SIGNATURE);
    unsetenv("GPT_TRUSTED_KEYS");
    test::LogCapture log;
    CHECK(load_with_keys(unsigned_art.dir(), nullptr) == GPT_OK);
    CHECK(log.saw("signatures are off"));
}

TEST_CASE("MalformedTrustedKeysAreAnErrorNotSilentlyOff", "[signature]") {
    SignedArtifact s;
    const auto root = s.art.dir().parent_path();
    std::ofstream(root / "bad.pub") << "ed25519-public:abcd\n";
    CHECK(load_with_keys(s.art.dir(), (root / "bad.pub").c_str()) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("not a public key"));
    CHECK(load_with_keys(s.art.dir(), (root / "missing.pub").c_str()) == GPT_ERR_INVALID_ARGUMENT);
    std::filesystem::create_directory(root / "empty");
    CHECK(load_with_keys(s.art.dir(), (root / "empty").c_str()) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("no *.pub"));
}

TEST_CASE("EmptyTrustedKeysAreAnErrorNotSilentlyOff", "[signature]") {
    // Set but empty is a configuration mistake, not a request to turn signatures off.
    test::ScratchArtifact unsigned_art(test::artifact());
    setenv("GPT_TRUSTED_KEYS", "", 1);
    CHECK(load_with_keys(unsigned_art.dir(), nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("GPT_TRUSTED_KEYS is set but empty"));
    unsetenv("GPT_TRUSTED_KEYS");
    CHECK(load_with_keys(unsigned_art.dir(), "") == GPT_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("trusted_keys is set but empty"));
    const auto root = unsigned_art.dir().parent_path();
    std::ofstream(root / "blank.pub") << "\n";  // a key file holding no key
    CHECK(load_with_keys(unsigned_art.dir(), (root / "blank.pub").c_str()) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("blank.pub"));
}

TEST_CASE("ArtifactSignedByGptAotSignLoads", "[signature]") {
    // The Python signer and the C++ verifier agree on key files, key ids and manifest.sig.
    // GPT_TEST_PYTHON and GPT_TEST_AOT_DIR come from tests/CMakeLists.txt: this tree's gpt_aot.
    test::ScratchArtifact art(test::artifact());
    const auto prefix = art.dir().parent_path() / "py";
    const std::string cli = std::string("PYTHONPATH=" GPT_TEST_AOT_DIR " " GPT_TEST_PYTHON " -m gpt_aot ");
    REQUIRE(std::system((cli + "keygen -o " + prefix.string() + " >/dev/null").c_str()) == 0);
    REQUIRE(std::system(
                (cli + "sign " + art.dir().string() + " --key " + prefix.string() + ".key >/dev/null").c_str()) == 0);
    const std::string pub = prefix.string() + ".pub";
    CHECK(load_with_keys(art.dir(), pub.c_str()) == GPT_OK);
    CHECK(load_with_keys(art.dir(), SignedArtifact().public_key.c_str()) == GPT_ERR_ARTIFACT_SIGNATURE);
}

namespace {

// gpt_artifact_select on `dir` (keys from $GPT_TRUSTED_KEYS): the chosen directory, or "" with *status.
std::string select_dir(const std::filesystem::path &dir, gpt_status *status) {
    char out[4096];
    size_t size = 0;
    *status = gpt_artifact_select(dir.c_str(), 0, out, sizeof out, &size);
    return *status == GPT_OK ? std::string(out) : std::string();
}

// Sets $GPT_TRUSTED_KEYS for one scope.
struct TrustedKeysEnv {
    explicit TrustedKeysEnv(const std::filesystem::path &keys) { setenv("GPT_TRUSTED_KEYS", keys.c_str(), 1); }
    ~TrustedKeysEnv() { unsetenv("GPT_TRUSTED_KEYS"); }
};

}  // namespace

TEST_CASE("SelectionWithKeysTakesTheSignedTargetOverUnsignedOnesItWouldPrefer", "[signature][select]") {
    // cpu is signed; a_cpu (signed over other bytes) and b_cpu (unsigned) are CPU targets that sort first,
    // so selection without keys prefers a_cpu.
    SignedArtifact s;
    const json cpu_target = s.art.manifest()["target"];
    const auto wrongly_signed = s.art.add_target("a_cpu", cpu_target);  // manifest rewritten, cpu's manifest.sig kept
    json m = s.art.manifest();
    m["name"] = "tampered";
    std::ofstream(wrongly_signed / "manifest.json", std::ios::trunc) << m.dump(2);
    const auto unsigned_dir = s.art.add_target("b_cpu", cpu_target);
    std::filesystem::remove(unsigned_dir / "manifest.sig");
    gpt_status status = GPT_OK;
    REQUIRE(select_dir(s.art.model_dir(), &status) == wrongly_signed.string());

    {
        TrustedKeysEnv env(s.public_key);
        test::LogCapture log;
        CHECK(select_dir(s.art.model_dir(), &status) == s.art.dir().string());
        CHECK(log.saw("skipped target a_cpu (signature)"));
        CHECK(log.saw("skipped target b_cpu (signature)"));
        CHECK(log.saw("not signed"));
    }
    test::LogCapture log;
    CHECK(load_with_keys(s.art.model_dir(), s.public_key.c_str()) == GPT_OK);
    CHECK(log.saw("selected " + s.art.dir().string()));
    CHECK(log.saw("signed by trusted key " + s.key.id));

    // No target verifies: the signature status, every target named with why.
    std::filesystem::remove(s.art.file("manifest.sig"));
    CHECK(load_with_keys(s.art.model_dir(), s.public_key.c_str()) == GPT_ERR_ARTIFACT_SIGNATURE);
    INFO(gpt_runtime_last_error());
    CHECK(error_mentions("a_cpu: "));
    CHECK(error_mentions("b_cpu: "));
    CHECK(error_mentions("/cpu' is not signed"));
    // Without keys the unsigned targets load as before.
    CHECK(load_with_keys(s.art.model_dir(), nullptr) == GPT_OK);
}

TEST_CASE("SelectionAndDescriptionV2TakeTheirTrustedKeysAsAnArgument", "[signature][select]") {
    // As above: a_cpu (signed over other bytes) and b_cpu (unsigned) sort before the signed cpu.
    SignedArtifact s;
    const json cpu_target = s.art.manifest()["target"];
    const auto wrongly_signed = s.art.add_target("a_cpu", cpu_target);
    json m = s.art.manifest();
    m["name"] = "tampered";
    std::ofstream(wrongly_signed / "manifest.json", std::ios::trunc) << m.dump(2);
    std::filesystem::remove(s.art.add_target("b_cpu", cpu_target) / "manifest.sig");
    unsetenv("GPT_TRUSTED_KEYS");
    const std::string dir = s.art.model_dir().string();
    const auto selected = [&](const char *keys) {
        char out[4096];
        size_t size = 0;
        REQUIRE(gpt_artifact_select_v2(dir.c_str(), 0, keys, out, sizeof out, &size) == GPT_OK);
        return std::string(out);
    };
    const auto described = [&](const char *keys) {
        size_t size = 0;
        REQUIRE(gpt_artifact_describe_v2(dir.c_str(), 0, keys, nullptr, 0, &size) == GPT_ERR_BUFFER_TOO_SMALL);
        std::string report(size, '\0');
        REQUIRE(gpt_artifact_describe_v2(dir.c_str(), 0, keys, report.data(), size, &size) == GPT_OK);
        return json::parse(report.c_str())["selected"]["dir"].get<std::string>();
    };
    // NULL: the environment's keys, here none, as the first forms.
    CHECK(selected(nullptr) == wrongly_signed.string());
    CHECK(described(nullptr) == wrongly_signed.string());
    // The keys given, with GPT_TRUSTED_KEYS unset: only the signed target is selected.
    CHECK(selected(s.public_key.c_str()) == s.art.dir().string());
    CHECK(described(s.public_key.c_str()) == s.art.dir().string());

    char out[4096];
    size_t size = 0;
    CHECK(gpt_artifact_select_v2(dir.c_str(), 0, "", out, sizeof out, &size) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_artifact_describe_v2(dir.c_str(), 0, "", nullptr, 0, &size) == GPT_ERR_INVALID_ARGUMENT);
    const uint32_t unknown = UINT32_C(1) << 7;
    CHECK(gpt_artifact_select_v2(dir.c_str(), unknown, nullptr, out, sizeof out, &size) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(error_mentions("flags"));
    CHECK(gpt_artifact_describe_v2(dir.c_str(), unknown, nullptr, nullptr, 0, &size) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_artifact_select(dir.c_str(), unknown, out, sizeof out, &size) == GPT_OK);  // the first form ignores it
}

TEST_CASE("ManifestFailingItsSignatureIsNeverParsed", "[signature][select]") {
    // Malformed JSON under a signature over other bytes: the signature error, never a parse error,
    // whether the artifact is named directly or selected from its model directory.
    SignedArtifact s;
    std::ofstream(s.art.file("manifest.json"), std::ios::trunc) << "{\"format\": [[[[";
    for (const auto &dir : {s.art.dir(), s.art.model_dir()}) {
        INFO(dir);
        CHECK(load_with_keys(dir, s.public_key.c_str()) == GPT_ERR_ARTIFACT_SIGNATURE);
        CHECK(error_mentions("does not match manifest.json"));
        CHECK_FALSE(error_mentions("not valid JSON"));
    }
    TrustedKeysEnv env(s.public_key);
    gpt_status status = GPT_OK;
    select_dir(s.art.model_dir(), &status);
    CHECK(status == GPT_ERR_ARTIFACT_SIGNATURE);
    CHECK_FALSE(error_mentions("not valid JSON"));
}
