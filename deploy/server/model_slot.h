// model_slot.h — the model that serves new requests, and its hot swap: a new
// artifact is loaded and verified beside the old one, then swapped in atomically.
// Requests keep the model they started with until they finish.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "gpt_runtime.h"

namespace server {

// One loaded, verified artifact. Freed when the last request using it ends.
struct ServedModel {
    gpt_model *model = nullptr;
    gpt_model_info info{};
    std::string dir;  // the artifact directory that was selected and loaded
    ServedModel() = default;
    ~ServedModel();
    ServedModel(const ServedModel &) = delete;
    ServedModel &operator=(const ServedModel &) = delete;

    // Every generation's status goes through here. GPT_ERR_CUDA is the runtime's only sign of a failed
    // device (a CUDA error is sticky: later calls on that context fail too), so from the first one on
    // the model counts as failed and /readyz says 503 until a reload replaces it (a reload verifies
    // its golden vector on the device, so it fails while the device does). True for the status that
    // made it fail, so that the caller logs it once.
    bool note_status(gpt_status status) const;
    bool device_failed() const { return device_failed_.load(); }

private:
    mutable std::atomic<bool> device_failed_{false};
};

struct LoadOptions {
    int num_threads = 0;
    int num_runners = 1;
    bool allow_cpu_fallback = false;
    // Unset: the runtime reads GPT_TRUSTED_KEYS. Set but empty is the runtime's error, not "unset":
    // a keys setting that came out empty must not turn signature checks off.
    std::optional<std::string> trusted_keys;
};

struct LoadResult {
    gpt_status status = GPT_OK;
    std::string message;  // what was loaded, or why not
};

class ModelSlot {
public:
    explicit ModelSlot(LoadOptions options) : options_(std::move(options)) {}

    // Selects the target of `path` (model directory or artifact), loads it, runs
    // its golden vector and only then makes it current. On any failure the
    // current model stays. One load at a time: a concurrent call gets GPT_ERR_BUSY.
    LoadResult load(const std::string &path);

    // The model for a new request; null until a load succeeds.
    std::shared_ptr<const ServedModel> current() const;

private:
    LoadOptions options_;
    std::mutex loading_;
    mutable std::mutex mutex_;
    std::shared_ptr<const ServedModel> current_;
};

}  // namespace server
