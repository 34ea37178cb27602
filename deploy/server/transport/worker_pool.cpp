// worker_pool.cpp — see worker_pool.h.
#include "worker_pool.h"

#include <utility>

namespace server::http {

WorkerPool::WorkerPool(size_t threads) {
    threads_.reserve(threads);
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::submit(std::function<void()> task) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
}

void WorkerPool::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread &t : threads_)
        if (t.joinable()) t.join();
}

size_t WorkerPool::idle() const {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t taken = busy_ + tasks_.size();
    return taken >= threads_.size() ? 0 : threads_.size() - taken;
}

void WorkerPool::run() {
    while (true) {
        std::function<void()> task;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
            if (tasks_.empty()) return;  // stopping, and nothing left to run
            task = std::move(tasks_.front());
            tasks_.pop_front();
            ++busy_;
        }
        task();
        std::lock_guard<std::mutex> lock(mutex_);
        --busy_;
    }
}

}  // namespace server::http
