// model_slot.h — the model that serves new requests, and its hot swap: a new
// artifact is loaded and verified beside the old one, then swapped in atomically.
// Requests keep the model they started with until they finish.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "gpt_runtime.h"
#include "scheduling/scheduler.h"

namespace server {

// One loaded, verified artifact and the scheduler that batches its requests.
// Freed when the last request using it ends.
struct ServedModel {
    gpt_model *model = nullptr;
    gpt_model_info info{};
    std::string dir;  // the artifact directory that was selected and loaded: for the log and the admin only
    std::unique_ptr<Scheduler> scheduler;
    ServedModel() = default;
    ~ServedModel();
    ServedModel(const ServedModel &) = delete;
    ServedModel &operator=(const ServedModel &) = delete;
};

struct LoadOptions {
    int num_threads = 0;
    bool allow_cpu_fallback = false;
    bool cuda_graphs = true;  // false: GPT_MODEL_NO_CUDA_GRAPHS
    // Unset: the runtime reads GPT_TRUSTED_KEYS. Set but empty is the runtime's error, not "unset":
    // a keys setting that came out empty must not turn signature checks off.
    std::optional<std::string> trusted_keys;
    SchedulerOptions scheduling;  // --parallel must fit the artifact's max_batch, or the load is refused
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
    // Each load runs on a thread of its own, so that no caller's thread keeps what running graphs gives it.
    LoadResult load(const std::string &path);

    // The model for a new request; null until a load succeeds.
    std::shared_ptr<const ServedModel> current() const;

private:
    LoadResult load_on_this_thread(const std::string &path);

    LoadOptions options_;
    std::mutex loading_;
    mutable std::mutex mutex_;
    std::shared_ptr<const ServedModel> current_;
};

}  // namespace server
