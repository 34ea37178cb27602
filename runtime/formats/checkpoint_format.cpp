// checkpoint_format.cpp — strict checks of a checkpoint's string metadata.
#include "formats/checkpoint_format.h"

#include "base/error.h"

namespace gpt {

namespace {

std::string value_of(const StringMap &metadata, const std::string &key) {
    const auto it = metadata.find(key);
    return it == metadata.end() ? std::string() : it->second;
}

// A non-negative decimal integer that fits int64 (no sign, no spaces, no suffix); -1 otherwise.
int64_t parse_count(const std::string &text) {
    if (text.empty() || text.size() > 18) return -1;  // 18 digits cannot overflow int64
    int64_t value = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return -1;
        value = value * 10 + (c - '0');
    }
    return value;
}

}  // namespace

int64_t check_checkpoint_metadata(const StringMap &metadata, const StringMap &model, const std::string &path) {
    if (value_of(metadata, "format") != kCheckpointFormat)
        fail(GPT_ERR_ARTIFACT_INVALID, "'" + path + "' is not a gpt-aot checkpoint");
    const std::string version = value_of(metadata, "format_version");
    if (version != kCheckpointVersion && version != kOldestCheckpointVersion)
        fail(GPT_ERR_ARTIFACT_VERSION, "checkpoint format version '" + version + "', this runtime reads versions " +
                                           kOldestCheckpointVersion + " and " + kCheckpointVersion +
                                           ": resume it with the runtime that saved it, or a newer one");
    for (const auto &[key, expected] : model) {
        if (key == "model.name") continue;  // a renamed artifact of the same shape may resume
        const std::string actual = value_of(metadata, key);
        if (actual != expected)
            fail(GPT_ERR_INVALID_ARGUMENT,
                 "checkpoint '" + path + "' has " + key + " = '" + actual + "', this model has '" + expected + "'");
    }
    const int64_t iteration = parse_count(value_of(metadata, "iteration"));
    if (iteration < 0) fail(GPT_ERR_ARTIFACT_INVALID, "checkpoint '" + path + "' has no valid iteration");
    return iteration;
}

}  // namespace gpt
