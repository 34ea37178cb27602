// artifact_select.h — a model directory holds one artifact per target
// (model_artifacts/<name>/{cpu,sm_80,sm_90,...}); pick the one that fits this
// machine and say why, or say why none does.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "artifact/device.h"
#include "formats/manifest.h"
#include "formats/signature.h"
#include "gpt_runtime.h"

namespace gpt {

// One artifact directory and whether it would load on this host.
struct TargetReport {
    std::string dir;
    std::optional<Manifest> manifest;  // absent when manifest.json is unreadable
    gpt_status status = GPT_OK;        // first check that fails here; GPT_OK = loads here
    std::string problem;               // its message
    bool hashes_checked = false;
};

// The artifact directories under `path`: `path` itself when it holds a
// manifest.json, else each sub-directory that does. With `check_hashes`, every
// file's size and sha256 are checked too (reads every byte). With `trusted_keys`,
// each manifest.sig is verified before its manifest is parsed: a target that is
// unsigned or wrongly signed is reported with GPT_ERR_ARTIFACT_SIGNATURE, unparsed.
std::vector<TargetReport> scan_targets(const std::string &path, const Host &host, bool check_hashes,
                                       const std::vector<PublicKey> &trusted_keys = {});

struct Selection {
    std::string dir;
    std::string reason;
};

// The exact GPU arch first; without a GPU, a CPU artifact; with a GPU but no
// artifact for its arch, a CPU artifact only when `allow_cpu_fallback`.
// Throws GPT_ERR_ARTIFACT_NOT_FOUND, _DEVICE_MISMATCH or _DEVICE_UNAVAILABLE
// with the targets found and what to do.
Selection select_target(const std::vector<TargetReport> &targets, const Host &host, bool allow_cpu_fallback);

// A JSON report of `path` for ops tools: host, every target (manifest summary,
// files, sizes, hashes, whether it loads here and why not) and the selection;
// signatures are checked against `trusted_keys` when there are any.
std::string describe_targets(const std::string &path, bool allow_cpu_fallback, bool check_hashes,
                             const std::vector<PublicKey> &trusted_keys);

// scan_targets + select_target for this host; the choice is logged with its reason,
// and each target skipped for its signature at warn level with why.
Selection select_artifact(const std::string &path, bool allow_cpu_fallback, const std::vector<PublicKey> &trusted_keys);

// `path` itself when it is an artifact (its own checks come at load), else select_artifact's choice.
std::string resolve_artifact_dir(const std::string &path, bool allow_cpu_fallback,
                                 const std::vector<PublicKey> &trusted_keys);

}  // namespace gpt
