// error.cpp — status names and the per-thread storage of the last error message.
#include "base/error.h"

namespace gpt {

namespace {
thread_local std::string t_last_error;
}

void set_last_error(const std::string &message) { t_last_error = message; }

const char *last_error() noexcept { return t_last_error.c_str(); }

const char *status_name(gpt_status status) noexcept {
    switch (status) {
        case GPT_OK: return "GPT_OK";
        case GPT_ERR_INVALID_ARGUMENT: return "GPT_ERR_INVALID_ARGUMENT";
        case GPT_ERR_OUT_OF_RANGE: return "GPT_ERR_OUT_OF_RANGE";
        case GPT_ERR_BUFFER_TOO_SMALL: return "GPT_ERR_BUFFER_TOO_SMALL";
        case GPT_ERR_ARTIFACT_NOT_FOUND: return "GPT_ERR_ARTIFACT_NOT_FOUND";
        case GPT_ERR_ARTIFACT_INVALID: return "GPT_ERR_ARTIFACT_INVALID";
        case GPT_ERR_ARTIFACT_VERSION: return "GPT_ERR_ARTIFACT_VERSION";
        case GPT_ERR_ARTIFACT_HASH: return "GPT_ERR_ARTIFACT_HASH";
        case GPT_ERR_ARTIFACT_SIGNATURE: return "GPT_ERR_ARTIFACT_SIGNATURE";
        case GPT_ERR_TORCH_VERSION: return "GPT_ERR_TORCH_VERSION";
        case GPT_ERR_VERIFY_FAILED: return "GPT_ERR_VERIFY_FAILED";
        case GPT_ERR_DEVICE_MISMATCH: return "GPT_ERR_DEVICE_MISMATCH";
        case GPT_ERR_DEVICE_UNAVAILABLE: return "GPT_ERR_DEVICE_UNAVAILABLE";
        case GPT_ERR_OUT_OF_MEMORY: return "GPT_ERR_OUT_OF_MEMORY";
        case GPT_ERR_CUDA: return "GPT_ERR_CUDA";
        case GPT_ERR_ABORTED: return "GPT_ERR_ABORTED";
        case GPT_ERR_BUSY: return "GPT_ERR_BUSY";
        case GPT_ERR_NON_FINITE: return "GPT_ERR_NON_FINITE";
        case GPT_ERR_PEER_FAILED: return "GPT_ERR_PEER_FAILED";
        case GPT_ERR_IO: return "GPT_ERR_IO";
        case GPT_ERR_INTERNAL: return "GPT_ERR_INTERNAL";
    }
    return "GPT_ERR_UNKNOWN";
}

}  // namespace gpt
