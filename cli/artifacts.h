// artifacts.h — `gpt artifacts list|inspect|select`: what a model directory
// holds per target, whether each would load here, and which one this machine takes.
#pragma once

#include <string>

namespace cli {

struct ArtifactsOptions {
    std::string path;  // model_artifacts/<name> or one artifact
    bool allow_cpu_fallback = false;
    bool check_hashes = false;
};

int cmd_artifacts_list(const ArtifactsOptions &o);
int cmd_artifacts_inspect(const ArtifactsOptions &o);  // the JSON report, hashes checked
int cmd_artifacts_select(const ArtifactsOptions &o);   // the chosen directory on stdout, the reason on stderr

}  // namespace cli
