// Corrupt, foreign and mismatched artifacts: each is refused with its own status
// and a message, never a crash, and never after running the artifact's code.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "artifact/device.h"
#include "artifact/kernels_check.h"
#include "exec/model.h"
#include "test_support.h"

namespace {

using nlohmann::json;

gpt_status load(const std::filesystem::path &dir) {
    gpt_model *model = reinterpret_cast<gpt_model *>(0x1);  // must stay untouched on failure
    const gpt_status s = gpt_model_load(dir.c_str(), nullptr, &model);
    if (s == GPT_OK) {
        gpt_model_free(model);
    } else {
        CHECK(model == reinterpret_cast<gpt_model *>(0x1));
        CHECK(std::string(gpt_runtime_last_error()).size() > 10);
    }
    return s;
}

using test::error_mentions;
using test::flip_byte;

void truncate_file(const std::filesystem::path &file, uintmax_t keep) { std::filesystem::resize_file(file, keep); }

void edit_manifest(const test::ScratchArtifact &art, const std::function<void(json &)> &edit) {
    auto m = art.manifest();
    edit(m);
    art.write_manifest(m);
}

// A line of /proc/self/status in kB (VmRSS, VmHWM), 0 where it cannot be read.
uint64_t status_kb(const std::string &key) {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind(key + ":", 0) == 0) return std::stoull(line.substr(key.size() + 1));
    return 0;
}

// Starts a new peak resident set (VmHWM = VmRSS); false where the kernel does not let this process.
bool reset_peak_resident() {
    std::ofstream clear_refs("/proc/self/clear_refs");
    clear_refs << "5";
    clear_refs.flush();
    return clear_refs.good() && status_kb("VmHWM") <= status_kb("VmRSS") + 1024;
}

}  // namespace

TEST_CASE("the unmodified test artifact loads", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    CHECK(load(art.dir()) == GPT_OK);
}

TEST_CASE("MissingManifestIsNotFound", "[artifact]") {
    CHECK(load("/nonexistent/artifact") == GPT_ERR_ARTIFACT_NOT_FOUND);
    test::ScratchArtifact art(test::artifact());
    std::filesystem::remove(art.file("manifest.json"));
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_NOT_FOUND);
    CHECK(error_mentions("manifest.json"));
}

TEST_CASE("MalformedJsonIsInvalid", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    std::ofstream(art.file("manifest.json")) << "{\"format\": \"gpt-aot\", \"format_version\": 1,";
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("not valid JSON"));
}

TEST_CASE("DeeplyNestedManifestIsRefusedBeforeItIsBuilt", "[artifact]") {
    // 10 000 nested arrays under a key the runtime ignores: without a depth limit the parser builds them all
    // (a 16 MiB manifest of them cost about 1.1 GB).
    test::ScratchArtifact art(test::artifact());
    std::string text;
    {
        std::ifstream in(art.file("manifest.json"));
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    const size_t open = text.find('{');
    REQUIRE(open != std::string::npos);
    text.insert(open + 1, "\"unknown\": " + std::string(10000, '[') + std::string(10000, ']') + ", ");
    std::ofstream(art.file("manifest.json"), std::ios::trunc) << text;
    const auto start = std::chrono::steady_clock::now();
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("nests deeper than 16"));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
    // The same manifest without the nesting loads.
    edit_manifest(art, [](json &m) { m["unknown"] = json::array({json::array({1})}); });
    CHECK(load(art.dir()) == GPT_OK);
}

TEST_CASE("HugeModelSizesInAManifestAreRefusedBeforeAnythingIsSizedFromThem", "[artifact]") {
    // An n_layer of 2^31 - 1 grew gpt_model_load (and `gpt info`) by ~340 MB/s until it was killed: the loader
    // listed every layer's weight names before it compared the weights file with them. Each size is bounded as
    // the manifest is parsed (formats/manifest.h), before any file is hashed or anything sized from it.
    test::ScratchArtifact art(test::artifact());
    const json original = art.manifest();
    const bool peak_resets = reset_peak_resident();
    if (!peak_resets) WARN("this kernel does not reset the peak resident set: memory is not checked here");
    const auto refused_quickly = [&](const std::function<void(json &)> &edit, const std::string &needle) {
        art.write_manifest(original);
        edit_manifest(art, edit);
        reset_peak_resident();
        const uint64_t resident_kb = status_kb("VmRSS");
        const auto start = std::chrono::steady_clock::now();
        CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
        CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
        CHECK(error_mentions(needle));
        if (peak_resets)
            CHECK(status_kb("VmHWM") < resident_kb + uint64_t{64} * 1024);  // under 64 MiB more at any time
    };
    const int64_t huge = INT32_MAX;
    for (const char *size : {"n_layer", "n_head", "n_embd", "block_size", "vocab_size", "padded_vocab_size"}) {
        INFO(size);
        refused_quickly([&](json &m) { m["model"][size] = huge; },
                        "'" + std::string(size) + "' must be an integer from 1 to");
        refused_quickly([&](json &m) { m["model"][size] = int64_t{1} << 40; }, "'" + std::string(size) + "'");
    }
    for (const char *graph : {"prefill", "decode"}) {
        INFO(graph);
        refused_quickly([&](json &m) { m["graphs"][graph]["max_batch"] = huge; },
                        "'max_batch' must be an integer from 1 to");
    }
    // At the bounds the sizes are merely wrong for these weights: the loader's list of names stays small.
    refused_quickly([](json &m) { m["model"]["n_layer"] = gpt::kMaxLayers; }, "lacks 'transformer.h.");
    refused_quickly([](json &m) { m["model"]["block_size"] = gpt::kMaxBlockSize; },
                    "expected [" + std::to_string(gpt::kMaxBlockSize) + ", ");
    refused_quickly([](json &m) { m["model"]["padded_vocab_size"] = gpt::kMaxVocab; },
                    "expected [" + std::to_string(gpt::kMaxVocab) + ", ");
    art.write_manifest(original);
    CHECK(load(art.dir()) == GPT_OK);
}

TEST_CASE("UnknownFormatVersionIsRefused", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    edit_manifest(art, [](json &m) { m["format_version"] = 99; });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_VERSION);
    CHECK(error_mentions("99"));
    // A number that narrows to the known version is still another version (found by fuzz_manifest's check).
    edit_manifest(art, [](json &m) { m["format_version"] = 4294967296u + 2; });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_VERSION);
    CHECK(error_mentions("4294967298"));
}

TEST_CASE("ForeignFormatAndMissingFieldsAreInvalid", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    const json original = art.manifest();
    edit_manifest(art, [](json &m) { m["format"] = "onnx"; });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    for (const char *field : {"model", "graphs", "files", "weights", "target", "golden"}) {
        art.write_manifest(original);
        edit_manifest(art, [&](json &m) { m.erase(field); });
        CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
        CHECK(error_mentions(field));
    }
    art.write_manifest(original);
    edit_manifest(art, [](json &m) { m["model"]["n_layer"] = -2; });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
}

TEST_CASE("the model's gelu is exact or tanh, and exact where a manifest predates it", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    for (const char *gelu : {"exact", "tanh"}) {
        edit_manifest(art, [&](json &m) { m["model"]["gelu"] = gelu; });
        CHECK(load(art.dir()) == GPT_OK);
    }
    edit_manifest(art, [](json &m) { m["model"].erase("gelu"); });
    CHECK(load(art.dir()) == GPT_OK);
    for (const json &bad : {json("erf"), json(1), json(nullptr)}) {
        edit_manifest(art, [&](json &m) { m["model"]["gelu"] = bad; });
        CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
        CHECK(error_mentions("gelu"));
    }
}

TEST_CASE("training.master_dtype is float32, and the model's dtype where a version-12 manifest predates it",
          "[artifact]") {
    test::ScratchArtifact art(test::artifact("bf16-train"));
    CHECK(load(art.dir()) == GPT_OK);
    for (const json &bad : {json("bfloat16"), json("float64"), json(1)}) {
        edit_manifest(art, [&](json &m) { m["training"]["master_dtype"] = bad; });
        CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
        CHECK(error_mentions("master_dtype"));
    }
    edit_manifest(art, [](json &m) { m["training"].erase("master_dtype"); });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("master_dtype"));
    // Version 12's adamw graph took the model's dtype: its trainer updates the weights themselves.
    edit_manifest(art, [](json &m) { m["format_version"] = 12; });
    const test::Model model(art.dir());
    REQUIRE(model.status == GPT_OK);
    CHECK(model.handle->impl->manifest().training->master_dtype == "bfloat16");
    CHECK(model.handle->impl->manifest().format_version == 12);
}

TEST_CASE("one file named for two parts of the artifact is invalid", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    edit_manifest(art, [](json &m) { m["golden"]["file"] = m["weights"]["file"]; });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("named for two parts"));
}

TEST_CASE("decode_one is required and takes exactly one row", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    const json original = art.manifest();
    edit_manifest(art, [](json &m) { m["graphs"]["decode_one"]["max_batch"] = 2; });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("decode_one.max_batch"));
    art.write_manifest(original);
    edit_manifest(art, [](json &m) { m["graphs"].erase("decode_one"); });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("decode_one"));
}

TEST_CASE("every inference graph names its linear form", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    const json original = art.manifest();
    for (const char *graph : {"prefill", "decode", "decode_one", "extend"}) {
        INFO(graph);
        art.write_manifest(original);
        edit_manifest(art, [graph](json &m) { m["graphs"][graph].erase("linear"); });
        CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
        CHECK(error_mentions("linear"));
    }
}

TEST_CASE("an onednn-form graph lists the weights to pack, each a 2-D weight of the model", "[artifact]") {
    test::ScratchArtifact art(test::artifact("math"));  // prefill and decode: onednn
    const json original = art.manifest();
    REQUIRE(original["graphs"]["decode"]["linear"]["form"] == "onednn");
    edit_manifest(art, [](json &m) { m["graphs"]["decode"]["linear"].erase("packed"); });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("missing field 'packed'"));
    for (const char *name : {"transformer.ln_f.weight", "no.such.weight"}) {
        INFO(name);
        art.write_manifest(original);
        edit_manifest(art, [name](json &m) { m["graphs"]["decode"]["linear"]["packed"].push_back(name); });
        CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
        CHECK(error_mentions(std::string("packs '") + name + "' for oneDNN"));
    }
}

TEST_CASE("FlippedByteInCompiledLibraryIsRefusedBeforeLoad", "[artifact]") {
    test::LogCapture log;
    test::ScratchArtifact art(test::artifact());
    flip_byte(art.file("prefill.pt2"), 4096);
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_HASH);
    CHECK(error_mentions("prefill.pt2"));
    CHECK(log.saw("verified decode.pt2"));  // hashing ran...
    CHECK_FALSE(log.saw("loaded graph"));   // ...and no compiled code was loaded
}

TEST_CASE("TruncatedWeightsAreRefused", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    const auto size = std::filesystem::file_size(art.file("weights.safetensors"));
    truncate_file(art.file("weights.safetensors"), size - 100);
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_HASH);
    CHECK(error_mentions("truncated"));
    // Even with a manifest that agrees with the truncated file, the parser refuses it.
    art.rehash("weights.safetensors");
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("invalid safetensors"));
}

TEST_CASE("WeightsThatDoNotFitTheConfigAreRefused", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    edit_manifest(art, [](json &m) { m["model"]["n_layer"] = 3; });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("transformer.h.2"));
    edit_manifest(art, [](json &m) {
        m["model"]["n_layer"] = 2;
        m["model"]["n_embd"] = 64;
    });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("expected"));
}

TEST_CASE("FileOutsideTheArtifactIsRefused", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    edit_manifest(art, [](json &m) { m["weights"]["file"] = "../weights.safetensors"; });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("plain name"));
}

TEST_CASE("ListedFileMissingOnDiskIsRefused", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    std::filesystem::remove(art.file("decode.pt2"));
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("decode.pt2"));
}

TEST_CASE("SymlinkedManifestIsRefusedWhereverItPoints", "[artifact]") {
    // A link could lead anywhere the loading process may read: only regular files inside the directory count.
    test::ScratchArtifact art(test::artifact());
    const auto outside = art.model_dir() / "elsewhere.json";
    std::filesystem::rename(art.file("manifest.json"), outside);
    std::filesystem::create_symlink(outside, art.file("manifest.json"));
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("manifest.json' is a symbolic link"));
    CHECK(load(art.model_dir()) != GPT_OK);  // as a model directory's target: selection refuses it too
    CHECK(error_mentions("is a symbolic link"));
}

TEST_CASE("SymlinkedArtifactFileIsRefusedEvenWithTheRightContent", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    const auto outside = art.model_dir() / "tokenizer-elsewhere.json";
    std::filesystem::rename(art.file("tokenizer.json"), outside);
    std::filesystem::create_symlink(outside, art.file("tokenizer.json"));  // same bytes: its sha256 matches
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
    CHECK(error_mentions("tokenizer.json' is a symbolic link"));
}

TEST_CASE("FifoInPlaceOfAnArtifactFileIsRefusedAsAFifoWithoutBlocking", "[artifact]") {
    for (const char *name : {"manifest.json", "tokenizer.json"}) {
        INFO(name);
        test::ScratchArtifact art(test::artifact());
        std::filesystem::remove(art.file(name));
        REQUIRE(::mkfifo(art.file(name).c_str(), 0600) == 0);  // nothing writes to it: a blocking open never returns
        CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
        CHECK(error_mentions(std::string(name) + "' is a FIFO"));
    }
}

TEST_CASE("an artifact whose code may use an extension this CPU lacks is refused before loading", "[artifact]") {
    const gpt::Host host = gpt::detect_host();
    std::string lacking;  // a real extension this CPU does not have
    for (const char *ext : {"avx512f", "avx512_fp16", "amx_tile", "amx_complex", "avx512_vp2intersect"})
        if (lacking.empty() && host.cpu_flags.count(ext) == 0) lacking = ext;
    REQUIRE(!lacking.empty());
    test::ScratchArtifact art(test::artifact());
    REQUIRE(load(art.dir()) == GPT_OK);  // the extensions recorded at compile time are all here
    edit_manifest(art, [&](json &m) {
        REQUIRE(m["target"]["isa_extensions"].size() > 10);
        m["target"]["isa_extensions"].push_back(lacking);
    });
    CHECK(load(art.dir()) == GPT_ERR_DEVICE_MISMATCH);
    CHECK(error_mentions(lacking));
    CHECK(error_mentions("--isa x86-64-v3"));
}

TEST_CASE("a CPU target's ISA record is typed and bounded", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    const json original = art.manifest();
    const std::vector<std::function<void(json &)>> edits = {
        [](json &m) { m["target"].erase("isa_extensions"); },
        [](json &m) { m["target"].erase("isa_level"); },
        [](json &m) { m["target"]["isa_extensions"] = "avx2 fma"; },
        [](json &m) { m["target"]["isa_extensions"].push_back(7); },
        [](json &m) { m["target"]["isa_extensions"].push_back("avx2 fma"); },
        [](json &m) { m["target"]["isa_extensions"].push_back(std::string(65, 'a')); },
        [](json &m) { m["target"]["isa_flags"] = json::array({std::string("-m\navx")}); },
        [](json &m) { m["target"]["isa_extensions"] = json(std::vector<std::string>(257, "sse2")); },
    };
    for (size_t i = 0; i < edits.size(); ++i) {
        INFO("edit " << i);
        art.write_manifest(original);
        edit_manifest(art, edits[i]);
        CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
        CHECK(error_mentions("isa_"));
    }
}

TEST_CASE("WrongTargetIsADeviceMismatch", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    const json original = art.manifest();
    edit_manifest(art, [](json &m) { m["target"]["arch"] = "aarch64"; });
    CHECK(load(art.dir()) == GPT_ERR_DEVICE_MISMATCH);
    CHECK(error_mentions("aarch64"));

    art.write_manifest(original);
    edit_manifest(art, [](json &m) {
        m["target"]["device"] = "cuda";
        m["target"]["arch"] = "sm_10";
    });
    const gpt_status s = load(art.dir());
    CHECK((s == GPT_ERR_DEVICE_UNAVAILABLE || s == GPT_ERR_DEVICE_MISMATCH));
    CHECK(error_mentions("sm_10"));
}

TEST_CASE("IncompatibleTorchVersionIsRefused", "[artifact]") {
    test::ScratchArtifact art(test::artifact());
    edit_manifest(art, [](json &m) { m["torch_version"] = "1.13.1"; });
    CHECK(load(art.dir()) == GPT_ERR_TORCH_VERSION);
    CHECK(error_mentions("1.13.1"));
}

namespace {

std::string read_all(const std::filesystem::path &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::filesystem::path &path, const std::string &bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// 16 offsets spread over a file of `size` bytes, first and last byte included.
std::vector<size_t> spread_offsets(size_t size) {
    std::vector<size_t> out;
    for (size_t k = 0; k < 16; ++k) out.push_back(k * (size - 1) / 15);
    return out;
}

}  // namespace

TEST_CASE("EveryFlippedOrTruncatedFileIsRefusedBeforeLoad", "[artifact]") {
    // ExecuTorch-style sweep: each listed file, a flipped byte or a cut at 16 places.
    test::ScratchArtifact art(test::artifact());
    const json manifest = art.manifest();
    int tried = 0, refused = 0;
    for (const auto &[name, entry] : manifest["files"].items()) {
        const std::string original = read_all(art.file(name));
        for (size_t offset : spread_offsets(original.size())) {
            std::string flipped = original;
            flipped[offset] = static_cast<char>(flipped[offset] ^ 0x01);
            write_all(art.file(name), flipped);
            ++tried;
            refused += load(art.dir()) == GPT_ERR_ARTIFACT_HASH;
            write_all(art.file(name), original.substr(0, offset));
            ++tried;
            refused += load(art.dir()) == GPT_ERR_ARTIFACT_HASH;
        }
        write_all(art.file(name), original);
    }
    CHECK(tried == 32 * static_cast<int>(manifest["files"].size()));
    CHECK(refused == tried);
    CHECK(load(art.dir()) == GPT_OK);  // restored: each refusal was the corruption's doing
}

TEST_CASE("TruncatedDataFilesWithAMatchingManifestAreRefusedByTheirParsers", "[artifact]") {
    // The manifest is rewritten to agree with each cut, so the parsers must catch it themselves.
    test::ScratchArtifact art(test::artifact());
    const json manifest = art.manifest();
    int tried = 0, refused = 0;
    for (const char *name : {"weights.safetensors", "golden.safetensors", "tokenizer.json", "manifest.json"}) {
        const std::string original = read_all(art.file(name));
        for (size_t offset : spread_offsets(original.size())) {
            INFO(name << " cut at " << offset);
            write_all(art.file(name), original.substr(0, offset));
            if (std::string(name) != "manifest.json") art.rehash(name);
            ++tried;
            const gpt_status s = load(art.dir());
            refused += s == GPT_ERR_ARTIFACT_INVALID;
            CHECK(s == GPT_ERR_ARTIFACT_INVALID);
            art.write_manifest(manifest);
        }
        write_all(art.file(name), original);
    }
    CHECK(tried == 64);
    CHECK(refused == tried);
    CHECK(load(art.dir()) == GPT_OK);
}

TEST_CASE("a kernels section is format 14's, names gpt_kernels operators, and is checked before graphs load",
          "[artifact]") {
    test::ScratchArtifact art(test::long_context_artifact());
    const json original = art.manifest();
    REQUIRE(original.at("format_version") == 14);
    REQUIRE(load(art.dir()) == GPT_OK);
    const std::vector<std::pair<std::function<void(json &)>, std::string>> bad = {
        {[](json &m) { m["format_version"] = 13; }, "'kernels' needs format version 14"},
        {[](json &m) { m["kernels"]["version"] = 0; }, "'kernels.version' must be an integer"},
        {[](json &m) { m["kernels"]["version"] = "1"; }, "'kernels.version' must be an integer"},
        {[](json &m) { m["kernels"]["operators"] = json::array(); }, "'kernels.operators' must list 1 to 64"},
        {[](json &m) { m["kernels"]["operators"] = {"aten::mm"}; }, "must be 'gpt_kernels::<name>'"},
        {[](json &m) { m["kernels"]["operators"] = {"gpt_kernels::"}; }, "must be 'gpt_kernels::<name>'"},
        {[](json &m) { m["kernels"]["operators"] = {"gpt_kernels::a b"}; }, "printable characters"},
        {[](json &m) { m["kernels"].erase("library"); }, "library"},
    };
    for (const auto &[edit, message] : bad) {
        art.write_manifest(original);
        edit_manifest(art, edit);
        CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_INVALID);
        CHECK(error_mentions(message));
    }
    // Well-formed, but not this runtime's library: refused as another version, saying what to do.
    art.write_manifest(original);
    edit_manifest(art, [](json &m) { m["kernels"]["version"] = 7; });
    CHECK(load(art.dir()) == GPT_ERR_ARTIFACT_VERSION);
    CHECK(error_mentions("kernel library version 7, this runtime has version " +
                         std::to_string(gpt::runtime_kernels_version())));
    CHECK(error_mentions("--decode-attention math"));
}
