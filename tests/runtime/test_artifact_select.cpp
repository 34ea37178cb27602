// Artifact selection per device: a model directory holds one artifact per target
// and the runtime takes the one that fits, says why, or says why none does.
// GPU hosts are simulated (gpt::Host), so every rule is checked without a GPU.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <set>

#include "artifact/artifact_select.h"
#include "artifact/device.h"
#include "base/error.h"
#include "test_support.h"

namespace {

using nlohmann::json;

const json kSm90 = {{"device", "cuda"}, {"arch", "sm_90"}, {"compute_capability", "9.0"}};

// This machine's CPU without its GPUs, if it has any: the "CPU host" of these tests stays one on a GPU machine.
gpt::Host cpu_host() {
    gpt::Host host = gpt::detect_host();
    host.cuda_devices = 0;
    host.gpu_arch.clear();
    host.gpu_name.clear();
    return host;
}

gpt::Host gpu_host(const std::string &arch, const std::string &name) {
    gpt::Host host = gpt::detect_host();
    host.cuda_devices = 1;
    host.gpu_arch = arch;
    host.gpu_name = name;
    return host;
}

// Runs select_target and returns the status it throws (GPT_OK if it selects).
gpt_status select_status(const std::filesystem::path &dir, const gpt::Host &host, bool fallback, std::string *message) {
    try {
        *message = gpt::select_target(gpt::scan_targets(dir, host, false), host, fallback).dir;
        return GPT_OK;
    } catch (const gpt::Error &e) {
        *message = e.what();
        return e.status();
    }
}

std::string describe(const std::filesystem::path &dir, uint32_t flags) {
    size_t size = 0;
    REQUIRE(gpt_artifact_describe(dir.c_str(), flags, nullptr, 0, &size) == GPT_ERR_BUFFER_TOO_SMALL);
    std::string text(size, '\0');
    REQUIRE(gpt_artifact_describe(dir.c_str(), flags, text.data(), size, &size) == GPT_OK);
    text.resize(size - 1);
    return text;
}

}  // namespace

namespace {

// check_target's status and message.
gpt_status target_status(const gpt::TargetSpec &target, const gpt::Host &host, std::string *message) {
    try {
        gpt::check_target(target, host);
        return GPT_OK;
    } catch (const gpt::Error &e) {
        *message = e.what();
        return e.status();
    }
}

}  // namespace

TEST_CASE("a CPU lacking any recorded extension is refused, every missing one named") {
    gpt::TargetSpec target{"cpu", "x86_64", "avx2", "x86-64-v3", {"avx", "avx2", "bmi2", "fma", "sse2"}, {}, ""};
    gpt::Host host;
    host.cpu_arch = "x86_64";
    host.cpu_flags = {"avx", "avx2", "bmi2", "fma", "sse2", "avx512f"};
    std::string message;
    CHECK(target_status(target, host, &message) == GPT_OK);

    host.cpu_flags.erase("bmi2");  // the vector ISA's word ("avx2") is present; one scalar extension is not
    CHECK(target_status(target, host, &message) == GPT_ERR_DEVICE_MISMATCH);
    CHECK(message.find("bmi2") != std::string::npos);
    CHECK(message.find("--isa x86-64-v3") != std::string::npos);
    CHECK(message.find("avx2 ") == std::string::npos);  // only what is missing is listed

    host.cpu_flags.erase("fma");
    CHECK(target_status(target, host, &message) == GPT_ERR_DEVICE_MISMATCH);
    CHECK(message.find("bmi2 fma") != std::string::npos);
}

TEST_CASE("the host's CPU flags are those every processor in cpuinfo shows, from the file GPT_CPUINFO names") {
    // The compile reads the same file the same way (aot/gpt_aot/compiler/isa.py cpu_flags, tests/aot/test_isa.py).
    const std::filesystem::path path = std::filesystem::temp_directory_path() / "gpt-test-cpuinfo";
    std::ofstream(path) << "processor\t: 0\nflags\t\t: fpu sse2 avx2 rdseed\nvmx flags\t: vnmi ept\n\n"
                           "processor\t: 1\nflags\t\t: fpu sse2 avx2\nvmx flags\t: vnmi\n";
    const char *saved = std::getenv("GPT_CPUINFO");
    const std::string restore = saved != nullptr ? saved : "";
    setenv("GPT_CPUINFO", path.c_str(), 1);
    const gpt::Host host = gpt::detect_host();
    if (saved != nullptr) {
        setenv("GPT_CPUINFO", restore.c_str(), 1);
    } else {
        unsetenv("GPT_CPUINFO");
    }
    std::filesystem::remove(path);
    CHECK(host.cpu_flags == std::set<std::string>{"avx2", "fpu", "sse2"});
    CHECK(!gpt::detect_host().cpu_flags.empty());  // the real /proc/cpuinfo again
}

TEST_CASE("a CUDA artifact compiled with another CUDA major is refused with both versions named") {
    gpt::TargetSpec target;
    target.device = "cuda";
    target.arch = "sm_90";
    target.cuda_version = "12.4";
    gpt::Host host = gpu_host("sm_90", "NVIDIA H100");
    host.cuda_version = "13.0";
    std::string message;
    CHECK(target_status(target, host, &message) == GPT_ERR_TORCH_VERSION);
    CHECK(message.find("compiled with CUDA 12.4, this runtime's torch uses CUDA 13.0") != std::string::npos);
    CHECK(message.find("CUDA 13.x") != std::string::npos);
    target.cuda_version = "13.2";  // the same major: the artifact runs
    CHECK(target_status(target, host, &message) == GPT_OK);
    target.cuda_version.clear();  // not recorded: nothing to compare
    CHECK(target_status(target, host, &message) == GPT_OK);

    // Read from the manifest: a faked sm_90 target of CUDA 12 in a model directory, on an H100 host of CUDA 13.
    test::ScratchArtifact art(test::artifact("flash"));
    art.add_target("sm_90", {{"device", "cuda"}, {"arch", "sm_90"}, {"cuda_version", "12.4"}});
    test::remove_tree(art.dir());  // the CUDA artifact alone: nothing to fall back to
    CHECK(select_status(art.model_dir(), host, false, &message) == GPT_ERR_TORCH_VERSION);
    CHECK(message.find("CUDA 12.4") != std::string::npos);
}

TEST_CASE("without a GPU the CPU artifact is selected") {
    test::ScratchArtifact art(test::artifact("flash"));
    art.add_target("sm_90", kSm90);
    const auto chosen = gpt::select_target(gpt::scan_targets(art.model_dir(), cpu_host(), false), cpu_host(), false);
    CHECK(chosen.dir == art.dir().string());
    CHECK(chosen.reason.find("no CUDA GPU") != std::string::npos);
}

TEST_CASE("a GPU takes the artifact of its exact arch") {
    test::ScratchArtifact art(test::artifact("flash"));
    const auto sm90 = art.add_target("sm_90", kSm90);
    art.add_target("sm_80", {{"device", "cuda"}, {"arch", "sm_80"}});
    const gpt::Host h100 = gpu_host("sm_90", "NVIDIA H100");
    const auto chosen = gpt::select_target(gpt::scan_targets(art.model_dir(), h100, false), h100, false);
    CHECK(chosen.dir == sm90.string());
    CHECK(chosen.reason.find("sm_90 (NVIDIA H100)") != std::string::npos);
}

TEST_CASE("a GPU without its arch's artifact falls back to the CPU one only when allowed") {
    test::ScratchArtifact art(test::artifact("flash"));
    art.add_target("sm_90", kSm90);
    const gpt::Host a100 = gpu_host("sm_80", "NVIDIA A100");
    std::string message;
    CHECK(select_status(art.model_dir(), a100, false, &message) == GPT_ERR_DEVICE_MISMATCH);
    CHECK(message.find("sm_80 (NVIDIA A100)") != std::string::npos);
    CHECK(message.find("artifact is sm_90, this GPU is sm_80") != std::string::npos);
    CHECK(message.find("allow CPU fallback") != std::string::npos);
    CHECK(select_status(art.model_dir(), a100, true, &message) == GPT_OK);
    CHECK(message == art.dir().string());
}

TEST_CASE("GPU-only model directory on a machine without a GPU is DEVICE_UNAVAILABLE") {
    test::ScratchArtifact art(test::artifact("flash"));
    art.add_target("sm_90", kSm90);
    test::remove_tree(art.dir());
    std::string message;
    CHECK(select_status(art.model_dir(), cpu_host(), true, &message) == GPT_ERR_DEVICE_UNAVAILABLE);
    CHECK(message.find("sm_90") != std::string::npos);
}

TEST_CASE("a target from another torch is skipped with its reason") {
    test::ScratchArtifact art(test::artifact("flash"));
    json m = art.manifest();
    m["torch_version"] = "2.3.0";
    art.write_manifest(m);
    std::string message;
    CHECK(select_status(art.model_dir(), cpu_host(), false, &message) == GPT_ERR_TORCH_VERSION);
    CHECK(message.find("cpu: artifact was compiled with torch 2.3.0") != std::string::npos);
}

TEST_CASE("a directory without artifacts is ARTIFACT_NOT_FOUND") {
    test::ScratchArtifact art(test::artifact("flash"));
    std::string message;
    CHECK(select_status(art.dir() / "..", cpu_host(), false, &message) == GPT_OK);
    std::filesystem::remove(art.file("manifest.json"));
    CHECK(select_status(art.model_dir(), cpu_host(), false, &message) == GPT_ERR_ARTIFACT_NOT_FOUND);
}

TEST_CASE("gpt_model_load on a model directory loads the selected target") {
    test::ScratchArtifact art(test::artifact("flash"));
    art.add_target("sm_90", kSm90);
    test::Model from_model_dir(art.model_dir());
    REQUIRE(from_model_dir.status == GPT_OK);
    CHECK(std::string(from_model_dir.info.device) == "cpu");

    size_t size = 0;
    CHECK(gpt_artifact_select(art.model_dir().c_str(), 0, nullptr, 0, &size) == GPT_ERR_BUFFER_TOO_SMALL);
    std::string dir(size, '\0');
    REQUIRE(gpt_artifact_select(art.model_dir().c_str(), 0, dir.data(), size, &size) == GPT_OK);
    CHECK(dir.c_str() == art.dir().string());
}

TEST_CASE("describe reports every target, whether it loads here, and hash mismatches") {
    test::ScratchArtifact art(test::artifact("flash"));
    const auto sm90 = art.add_target("sm_90", kSm90);
    const json plain = json::parse(describe(art.model_dir(), 0));
    REQUIRE(plain["targets"].size() == 2);
    CHECK(plain["targets"][0]["target"] == "cpu");
    CHECK(plain["targets"][0]["loads_here"] == true);
    CHECK(plain["targets"][0]["hashes"] == "not checked");
    CHECK(plain["targets"][0]["files"]["weights.safetensors"]["sha256"] ==
          art.manifest()["files"]["weights.safetensors"]["sha256"]);
    CHECK(plain["targets"][0]["attention_pick"]["backend"] == "flash");
    CHECK(plain["targets"][0]["isa_level"] == art.manifest()["target"]["isa_level"]);
    CHECK(plain["targets"][0]["isa_extensions"] == art.manifest()["target"]["isa_extensions"]);
    CHECK(plain["targets"][0]["isa_extensions"].size() > 10);
    CHECK(plain["targets"][0]["model"]["gelu"] == art.manifest()["model"].value("gelu", "exact"));
    CHECK(plain["targets"][1]["loads_here"] == false);
    CHECK(plain["targets"][1]["status"] == "GPT_ERR_DEVICE_UNAVAILABLE");
    CHECK(plain["selected"]["dir"] == art.dir().string());

    CHECK(json::parse(describe(art.model_dir(), GPT_ARTIFACT_CHECK_HASHES))["targets"][0]["hashes"] == "verified");
    std::ofstream(art.file("tokenizer.json"), std::ios::app) << " ";
    const json checked = json::parse(describe(art.model_dir(), GPT_ARTIFACT_CHECK_HASHES));
    CHECK(checked["targets"][0]["loads_here"] == false);
    CHECK(checked["targets"][0]["hashes"] == "mismatch");
    CHECK(checked["selected"].is_null());
    CHECK(checked["selection_error"]["message"].get<std::string>().find("tokenizer.json") != std::string::npos);
}
