// artifacts.cpp — see artifacts.h. The report comes from gpt_artifact_describe.
#include "artifacts.h"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "common.h"
#include "gpt_runtime.h"

namespace cli {

namespace {

uint32_t flags_of(const ArtifactsOptions &o, bool check_hashes) {
    uint32_t flags = 0;
    if (o.allow_cpu_fallback) flags |= GPT_ARTIFACT_ALLOW_CPU_FALLBACK;
    if (check_hashes) flags |= GPT_ARTIFACT_CHECK_HASHES;
    return flags;
}

// gpt_artifact_describe's JSON, or the status on failure.
gpt_status describe(const ArtifactsOptions &o, bool check_hashes, nlohmann::json *out) {
    size_t size = 0;
    gpt_status s = gpt_artifact_describe(o.path.c_str(), flags_of(o, check_hashes), nullptr, 0, &size);
    if (s != GPT_ERR_BUFFER_TOO_SMALL) return s;
    std::string text(size, '\0');
    if ((s = gpt_artifact_describe(o.path.c_str(), flags_of(o, check_hashes), text.data(), size, &size)) != GPT_OK)
        return s;
    text.resize(size - 1);
    *out = nlohmann::json::parse(text);
    return GPT_OK;
}

}  // namespace

int cmd_artifacts_list(const ArtifactsOptions &o) {
    nlohmann::json desc;
    if (gpt_status s = describe(o, o.check_hashes, &desc); s != GPT_OK) return report(s);
    const auto &host = desc["host"];
    std::printf("host: %s%s, torch %s\n", host["cpu_arch"].get<std::string>().c_str(),
                host["cuda_devices"].get<int>() > 0 ? (", GPU " + host["gpu_arch"].get<std::string>() + " (" +
                                                       host["gpu_name"].get<std::string>() + ")")
                                                          .c_str()
                                                    : ", no CUDA GPU",
                host["torch_version"].get<std::string>().c_str());
    std::printf("  %-8s %-6s %-8s %-10s %-9s %-10s %-8s %10s  %s\n", "target", "device", "arch", "isa level", "dtype",
                "attention", "torch", "MiB", "loads here");
    const std::string selected = desc["selected"].is_null() ? "" : desc["selected"]["dir"].get<std::string>();
    for (const auto &t : desc["targets"]) {
        const bool has_manifest = t.contains("name");
        auto str = [&](const char *key) { return has_manifest ? t[key].get<std::string>() : std::string("?"); };
        const double mib = has_manifest ? t["bytes"].get<double>() / (1 << 20) : 0.0;
        const std::string verdict = t["loads_here"].get<bool>() ? "yes" : "no: " + t["status"].get<std::string>();
        const std::string level = has_manifest && t["device"] == "cpu" ? str("isa_level") : "-";
        std::printf("%s %-8s %-6s %-8s %-10s %-9s %-10s %-8s %10.1f  %s\n", t["dir"] == selected ? "*" : " ",
                    t["target"].get<std::string>().c_str(), str("device").c_str(), str("arch").c_str(), level.c_str(),
                    str("dtype").c_str(), str("attention").c_str(), str("torch_version").c_str(), mib, verdict.c_str());
        // The CPU extensions the artifact's code may use: what a host must show in /proc/cpuinfo.
        if (has_manifest && t["device"] == "cpu") {
            std::string extensions;
            for (const auto &e : t["isa_extensions"]) extensions += " " + e.get<std::string>();
            std::printf("    isa extensions:%s\n", extensions.c_str());
        }
    }
    if (!selected.empty()) {
        std::printf("selected: %s (%s)\n", selected.c_str(), desc["selected"]["reason"].get<std::string>().c_str());
    } else {
        std::printf("selected: none — %s\n", desc["selection_error"]["message"].get<std::string>().c_str());
    }
    return 0;
}

int cmd_artifacts_inspect(const ArtifactsOptions &o) {
    nlohmann::json desc;
    if (gpt_status s = describe(o, true, &desc); s != GPT_OK) return report(s);
    std::printf("%s\n", desc.dump(2).c_str());
    return 0;
}

int cmd_artifacts_select(const ArtifactsOptions &o) {
    nlohmann::json desc;
    if (gpt_status s = describe(o, false, &desc); s != GPT_OK) return report(s);
    if (desc["selected"].is_null()) {
        const auto &e = desc["selection_error"];
        std::fprintf(stderr, "gpt: %s: %s\n", e["status"].get<std::string>().c_str(),
                     e["message"].get<std::string>().c_str());
        return 1;
    }
    std::printf("%s\n", desc["selected"]["dir"].get<std::string>().c_str());
    std::fprintf(stderr, "selected because: %s\n", desc["selected"]["reason"].get<std::string>().c_str());
    return 0;
}

}  // namespace cli
