// threads.cpp — ScopedThreads on ATen's thread-count calls (OpenMP's and MKL's
// per-thread settings behind them).
#include "exec/threads.h"

#include <ATen/Parallel.h>

namespace gpt {

ScopedThreads::ScopedThreads(int threads) {
    if (threads <= 0) return;
    const int current = at::get_num_threads();
    if (current == threads) return;
    at::set_num_threads(threads);
    previous_ = current;
}

ScopedThreads::~ScopedThreads() {
    if (previous_ > 0) at::set_num_threads(previous_);
}

}  // namespace gpt
