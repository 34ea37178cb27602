// threads.h — how the kernels spread work over torch's intra-op threads.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

namespace gpt::kernels {

// at::parallel_for is a header template over `#pragma omp parallel`: a library compiled without OpenMP runs
// every range on the calling thread alone, silently (how this library's linear and decode attention ran on one
// core of two until 2026-11-28). Both builds of the library (CMake's and the compile's extension) check it.
bool threaded();

// fn(i) for every i in [0, n), over the intra-op threads: each thread walks its own contiguous share front to back
// (one stream through memory, as at::parallel_for's split), then takes what is left of the others' shares. An
// equal split alone makes a call last as long as its slowest core, and on a VM the vCPUs' speeds differ from call
// to call; items dealt one by one to whichever thread asks keep the threads busy but interleave their streams.
// A batch-1 GPT-2 decode step's block linears on 2 vCPUs, ms (bench/results/cpu-2026-11-28-decode-streams/):
// dealt 6.84, equal split 6.75, own share then the others' 6.21; its head 2.54 dealt, 2.20 so.
template <typename Fn>
void for_each_item(int64_t n, const Fn &fn) {
    if (n <= 0) return;
    const int64_t team = std::min<int64_t>(at::get_num_threads(), n);
    struct alignas(64) Share {  // a cache line each: the owner's claims do not move the others' counters
        std::atomic<int64_t> next;
    };
    const std::unique_ptr<Share[]> shares(new Share[static_cast<size_t>(team)]);
    for (int64_t s = 0; s < team; ++s) shares[s].next.store(s * n / team, std::memory_order_relaxed);
    at::parallel_for(0, team, 1, [&](int64_t begin, int64_t) {
        for (int64_t offset = 0; offset < team; ++offset) {
            const int64_t owner = (begin + offset) % team, end = (owner + 1) * n / team;
            for (int64_t i = shares[owner].next.fetch_add(1, std::memory_order_relaxed); i < end;
                 i = shares[owner].next.fetch_add(1, std::memory_order_relaxed))
                fn(i);
        }
    });
}

}  // namespace gpt::kernels
