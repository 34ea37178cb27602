// model_slot.cpp — see model_slot.h.
#include "scheduling/model_slot.h"

#include <malloc.h>

#include <cstdio>
#include <exception>
#include <thread>
#include <utility>

namespace server {

namespace {

LoadResult failed(gpt_status status, const std::string &what) {
    return {status, what + ": " + gpt_status_to_string(status) + ": " + gpt_runtime_last_error()};
}

}  // namespace

ServedModel::~ServedModel() {
    scheduler.reset();  // its session first, so that the model is freed here, with the handle
    gpt_model_free(model);
}

LoadResult ModelSlot::load(const std::string &path) {
    std::unique_lock<std::mutex> one_at_a_time(loading_, std::try_to_lock);
    if (!one_at_a_time.owns_lock()) return {GPT_ERR_BUSY, "another reload is in progress"};
    // On a thread of its own, which ends with the load. The golden vector runs the graphs, and OpenMP gives every
    // thread that runs one a team of threads kept until that thread ends, as glibc gives it an arena that keeps
    // the load's transient buffers (the graphs' packages): loads on the HTTP workers grew the server by a team
    // and an arena per worker that ever reloaded (+5.3 MB each for a 240 kB model), and by cores - 1 threads.
    LoadResult result;
    std::thread loader([&] {
        try {
            result = load_on_this_thread(path);
        } catch (const std::exception &e) {  // not past the thread: that would end the process
            result = {GPT_ERR_INTERNAL, "cannot load " + path + ": " + e.what()};
        }
    });
    loader.join();
    malloc_trim(0);  // what the load and a freed model left free goes back to the system, not to the next load
    return result;
}

LoadResult ModelSlot::load_on_this_thread(const std::string &path) {
    const uint32_t flags = options_.allow_cpu_fallback ? uint32_t{GPT_ARTIFACT_ALLOW_CPU_FALLBACK} : 0u;
    size_t size = 0;
    gpt_status s = gpt_artifact_select(path.c_str(), flags, nullptr, 0, &size);
    if (s != GPT_ERR_BUFFER_TOO_SMALL) return failed(s, "no artifact of '" + path + "' fits");
    std::string dir(size, '\0');
    if ((s = gpt_artifact_select(path.c_str(), flags, dir.data(), size, &size)) != GPT_OK)
        return failed(s, "no artifact of '" + path + "' fits");
    dir.resize(size - 1);

    auto next = std::make_shared<ServedModel>();
    next->dir = dir;
    gpt_model_params params;
    gpt_model_default_params(&params, sizeof params);
    params.num_threads = options_.num_threads;
    if (!options_.cuda_graphs) params.flags |= GPT_MODEL_NO_CUDA_GRAPHS;
    if (options_.trusted_keys) params.trusted_keys = options_.trusted_keys->c_str();
    if ((s = gpt_model_load(dir.c_str(), &params, &next->model)) != GPT_OK) return failed(s, "cannot load " + dir);
    double max_err = 0.0;
    if ((s = gpt_model_verify(next->model, &max_err)) != GPT_OK) return failed(s, dir + " fails its golden vector");
    if ((s = gpt_model_get_info(next->model, &next->info, sizeof next->info)) != GPT_OK)
        return failed(s, "cannot describe " + dir);

    try {
        next->scheduler = std::make_unique<Scheduler>(next->model, next->info, options_.scheduling);
    } catch (const std::exception &e) {
        return {GPT_ERR_INVALID_ARGUMENT, "cannot serve " + dir + ": " + e.what()};
    }

    char detail[64];
    std::snprintf(detail, sizeof detail, "golden max abs error %.3g", max_err);
    const std::string message = "serving " + std::string(next->info.name) + " from " + dir + " (" + detail + ")";
    std::shared_ptr<const ServedModel> previous;  // freed here, outside the lock, unless requests still hold it
    {
        std::lock_guard<std::mutex> lock(mutex_);
        previous = std::exchange(current_, std::move(next));
    }
    return {GPT_OK, message};
}

std::shared_ptr<const ServedModel> ModelSlot::current() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return current_;
}

}  // namespace server
