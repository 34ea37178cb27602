// threads.h — a model's CPU thread count, applied to the calling thread for the
// length of one graph call. OpenMP's thread count (which the compiled kernels
// read with omp_get_max_threads, and ATen's ops with at::get_num_threads) is a
// per-thread setting: models loaded with different counts serve side by side,
// and loading one retunes no other.
#pragma once

namespace gpt {

class ScopedThreads {
public:
    // `threads` <= 0 leaves the calling thread's count as it is (torch's default:
    // OMP_NUM_THREADS, else one per core).
    explicit ScopedThreads(int threads);
    ~ScopedThreads();
    ScopedThreads(const ScopedThreads &) = delete;
    ScopedThreads &operator=(const ScopedThreads &) = delete;

private:
    int previous_ = 0;  // the count to restore; 0 when nothing was changed
};

}  // namespace gpt
