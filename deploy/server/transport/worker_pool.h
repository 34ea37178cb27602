// worker_pool.h — a fixed set of threads for routes that wait (generations,
// reloads). Their number bounds the requests handled at once; how many are free
// is what /readyz reports as the main port's capacity.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace server::http {

class WorkerPool {
public:
    explicit WorkerPool(size_t threads);
    ~WorkerPool();  // stop()
    WorkerPool(const WorkerPool &) = delete;
    WorkerPool &operator=(const WorkerPool &) = delete;

    void submit(std::function<void()> task);
    // Runs the tasks already submitted, then joins the threads.
    void stop();
    // Threads neither running a task nor about to: 0 means a new request waits for one.
    size_t idle() const;
    size_t size() const { return threads_.size(); }

private:
    void run();

    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::function<void()>> tasks_;
    size_t busy_ = 0;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace server::http
