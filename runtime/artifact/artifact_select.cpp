// artifact_select.cpp — see artifact_select.h.
#include "artifact/artifact_select.h"

#include <nlohmann/json.hpp>

#include "artifact/kernels_check.h"
#include "base/error.h"
#include "base/log.h"
#include "formats/files.h"
#include "formats/integrity.h"
#include "formats/signature.h"

namespace gpt {

namespace {

// A directory with anything named manifest.json: one that cannot be read is still
// reported as this artifact's problem, not passed over as "no artifact here".
bool is_artifact(const std::string &dir) { return path_exists(dir + "/" + kManifestFile); }

TargetReport check_artifact(const std::string &dir, const Host &host, bool check_hashes,
                            const std::vector<PublicKey> &trusted_keys) {
    TargetReport report;
    report.dir = dir;
    try {
        // With trusted keys, read_manifest checks manifest.sig before it parses a byte, so a
        // target whose signature fails is never parsed and never chosen (it is checked again at load).
        report.manifest = trusted_keys.empty()
                              ? parse_manifest(read_file(dir + "/" + kManifestFile, kMaxManifestBytes, Links::refuse))
                              : read_manifest(dir, trusted_keys);
        check_torch_version(report.manifest->torch_version);
        check_kernels(report.manifest->kernels);
        check_target(report.manifest->target, host);
        if (check_hashes) {
            verify_files(dir, *report.manifest);
            report.hashes_checked = true;
        }
    } catch (const Error &e) {
        report.status = e.status();
        report.problem = e.what();
    }
    return report;
}

std::string describe_host(const Host &host) {
    if (host.cuda_devices > 0) return "GPU " + host.gpu_arch + " (" + host.gpu_name + ")";
    return "CPU " + host.cpu_arch + ", no CUDA GPU";
}

std::string target_label(const TargetReport &t) {
    const size_t slash = t.dir.find_last_of('/');
    return slash == std::string::npos ? t.dir : t.dir.substr(slash + 1);
}

const TargetReport *find_fitting(const std::vector<TargetReport> &targets, const std::string &device,
                                 const std::string &arch) {
    for (const TargetReport &t : targets)
        if (t.status == GPT_OK && t.manifest->target.device == device &&
            (arch.empty() || t.manifest->target.arch == arch))
            return &t;
    return nullptr;
}

}  // namespace

std::vector<TargetReport> scan_targets(const std::string &path, const Host &host, bool check_hashes,
                                       const std::vector<PublicKey> &trusted_keys) {
    std::string root = path;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    if (is_artifact(root)) return {check_artifact(root, host, check_hashes, trusted_keys)};
    std::vector<TargetReport> targets;
    const auto subdirectories = list_directory(root, [](const std::string &, bool is_dir) { return is_dir; });
    for (const std::string &name : subdirectories.value_or(std::vector<std::string>{}))
        if (is_artifact(root + "/" + name))
            targets.push_back(check_artifact(root + "/" + name, host, check_hashes, trusted_keys));
    if (targets.empty())
        fail(GPT_ERR_ARTIFACT_NOT_FOUND, "no manifest.json in '" + path +
                                             "' nor in its sub-directories: point at an artifact "
                                             "(model_artifacts/<name>/<target>) or a model directory holding them");
    return targets;
}

Selection select_target(const std::vector<TargetReport> &targets, const Host &host, bool allow_cpu_fallback) {
    const bool has_gpu = host.cuda_devices > 0;
    if (has_gpu)
        if (const TargetReport *gpu = find_fitting(targets, "cuda", host.gpu_arch))
            return {gpu->dir, "artifact for this GPU's arch, " + describe_host(host)};
    const TargetReport *cpu = find_fitting(targets, "cpu", "");
    if (cpu && !has_gpu) {
        const TargetSpec &t = cpu->manifest->target;
        return {cpu->dir, "CPU artifact (" + t.isa_level + ", " + t.isa + "): no CUDA GPU present"};
    }
    if (cpu && allow_cpu_fallback)
        return {cpu->dir, "no artifact for " + describe_host(host) + "; CPU fallback is allowed"};

    // Nothing fits: name every target and why, and one status for the caller.
    std::string found;
    gpt_status status = targets.front().status;
    for (const TargetReport &t : targets) {
        found += (found.empty() ? "" : "; ") + target_label(t) + ": " + (t.status == GPT_OK ? "fits" : t.problem);
        if (t.status != status) status = GPT_ERR_DEVICE_MISMATCH;
    }
    std::string advice;
    if (status == GPT_ERR_ARTIFACT_SIGNATURE) {
        advice = "sign a target with `python -m gpt_aot sign` and a key you trust, or load without trusted keys";
    } else if (cpu) {
        status = GPT_ERR_DEVICE_MISMATCH;
        advice = "a CPU artifact fits: allow CPU fallback to use it, or compile one for " + host.gpu_arch;
    } else if (has_gpu) {
        advice = "compile one on this GPU with `python -m gpt_aot compile --target cuda --arch " + host.gpu_arch + "`";
    } else {
        advice = "compile a CPU artifact on a machine like this one with `python -m gpt_aot compile --target cpu`";
    }
    fail(status, "no artifact fits " + describe_host(host) + " (" + found + "): " + advice);
}

Selection select_artifact(const std::string &path, bool allow_cpu_fallback,
                          const std::vector<PublicKey> &trusted_keys) {
    const Host host = detect_host();
    const std::vector<TargetReport> targets = scan_targets(path, host, false, trusted_keys);
    for (const TargetReport &t : targets)
        if (t.status == GPT_ERR_ARTIFACT_SIGNATURE)
            log(GPT_LOG_WARN, "skipped target " + target_label(t) + " (signature): " + t.problem);
    Selection chosen = select_target(targets, host, allow_cpu_fallback);
    log(GPT_LOG_INFO, "selected " + chosen.dir + ": " + chosen.reason);
    return chosen;
}

std::string resolve_artifact_dir(const std::string &path, bool allow_cpu_fallback,
                                 const std::vector<PublicKey> &trusted_keys) {
    return is_artifact(path) ? path : select_artifact(path, allow_cpu_fallback, trusted_keys).dir;
}

std::string describe_targets(const std::string &path, bool allow_cpu_fallback, bool check_hashes,
                             const std::vector<PublicKey> &trusted_keys) {
    using nlohmann::json;
    const Host host = detect_host();
    const std::vector<TargetReport> targets = scan_targets(path, host, check_hashes, trusted_keys);
    json out;
    out["path"] = path;
    out["host"] = {{"cpu_arch", host.cpu_arch},
                   {"cpu_flags", host.cpu_flags},  // what the kernel lets this CPU run (cpuinfo, or GPT_CPUINFO)
                   {"cuda_devices", host.cuda_devices},
                   {"gpu_arch", host.gpu_arch},
                   {"gpu_name", host.gpu_name},
                   {"torch_version", runtime_torch_version()}};
    out["targets"] = json::array();
    for (const TargetReport &t : targets) {
        json entry = {{"target", target_label(t)},
                      {"dir", t.dir},
                      {"loads_here", t.status == GPT_OK},
                      {"status", status_name(t.status)},
                      {"problem", t.problem},
                      {"hashes", t.hashes_checked ? "verified"
                                                  : (t.status == GPT_ERR_ARTIFACT_HASH ? "mismatch" : "not checked")}};
        if (const auto &m = t.manifest) {
            uint64_t bytes = regular_file_size(t.dir + "/" + kManifestFile).value_or(0);
            json files = json::object();
            for (const auto &[name, f] : m->files) {
                files[name] = {{"sha256", f.sha256}, {"size", f.size}};
                bytes += f.size;
            }
            entry.update(
                {{"name", m->name},
                 {"format_version", m->format_version},
                 {"torch_version", m->torch_version},
                 {"device", m->target.device},
                 {"arch", m->target.arch},
                 {"isa", m->target.isa},
                 {"isa_level", m->target.isa_level},
                 {"isa_extensions", m->target.isa_extensions},
                 {"dtype", m->dtype},
                 {"attention", m->attention},
                 {"decode_attention", m->decode_attention},
                 {"linears",
                  {{"prefill", m->prefill.linear}, {"decode", m->decode.linear}, {"decode_one", m->decode_one.linear}}},
                 {"training", m->training.has_value()},
                 {"model",
                  {{"n_layer", m->model.n_layer},
                   {"n_head", m->model.n_head},
                   {"n_embd", m->model.n_embd},
                   {"block_size", m->model.block_size},
                   {"vocab_size", m->model.vocab_size},
                   {"gelu", m->model.gelu}}},
                 {"bytes", bytes},
                 {"files", files}});
            // How the kernel was picked (each candidate's time and error), as compile recorded it; left out
            // when the manifest changed since it was checked and no longer parses.
            json manifest;
            try {
                manifest =
                    parse_manifest_json(read_file(t.dir + "/" + kManifestFile, kMaxManifestBytes, Links::refuse));
            } catch (const Error &) {
            }
            if (manifest.is_object()) {
                entry["attention_pick"] = manifest.value("attention", json());
                for (const char *graph : {"prefill", "decode", "decode_one"})
                    entry["linear_picks"][graph] =
                        manifest.value(json::json_pointer(std::string("/graphs/") + graph + "/linear"), json());
            }
        }
        out["targets"].push_back(entry);
    }
    try {
        const Selection chosen = select_target(targets, host, allow_cpu_fallback);
        out["selected"] = {{"dir", chosen.dir}, {"reason", chosen.reason}};
    } catch (const Error &e) {
        out["selected"] = nullptr;
        out["selection_error"] = {{"status", status_name(e.status())}, {"message", e.what()}};
    }
    return out.dump(2);
}

}  // namespace gpt
