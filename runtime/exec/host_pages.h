// host_pages.h — CPU tensors in 2 MiB pages, for what every decode step walks through: the weights and the KV
// caches. A batch-1 step of GPT-2 124M reads ~250 MB spread over ~60 000 4-KiB pages, a TLB miss and a page walk
// each (under a hypervisor a walk of both page tables), and the hardware prefetchers stop at every 4-KiB boundary;
// in 2 MiB pages it is ~125 pages.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

namespace gpt {

// An uninitialised CPU tensor of `shape` and `dtype`, contiguous. Of 2 MiB or more, its memory is mapped apart,
// aligned to 2 MiB, and the whole 2 MiB spans in it are offered to the kernel's transparent huge pages
// (madvise(MADV_HUGEPAGE): honoured where THP is `always` or `madvise`, a no-op where `never`); the tail stays in
// small pages, so nothing past the tensor becomes resident. Smaller ones come from torch's allocator. The mapping
// is unmapped when the last tensor sharing it goes. Throws std::bad_alloc when the memory cannot be mapped.
at::Tensor empty_in_host_pages(at::IntArrayRef shape, at::ScalarType dtype);

// Many tensors side by side in one empty_in_host_pages mapping. A model's tensors are mostly below 2 MiB each
// (GPT-2 124M's block linears are 0.4–4.7 MB in bf16, 0.2–1.5 MB in int4), so mapped one by one they stayed in
// small pages: a batch-1 int4 step read 48 of its 77 MB that way, 8 % slower than from one arena
// (bench/results/cpu-2026-11-29-weights-arena/). The mapping goes when the arena and every tensor taken from it
// are gone: a tensor that outlives the others keeps the whole mapping resident, so what is freed early (a weight
// packed into a copy) must not come from one.
class HostArena {
public:
    // Each tensor's start is aligned to this (a cache line, and AOTInductor's alignment of its constants).
    static constexpr uint64_t ALIGN = 64;

    // The bytes a contiguous tensor of `shape` and `dtype` takes in an arena, its alignment included.
    static uint64_t slot_bytes(at::IntArrayRef shape, at::ScalarType dtype);

    // Room for tensors of `bytes` in all (the sum of their slot_bytes). Nothing is resident until written.
    explicit HostArena(uint64_t bytes);

    // The next uninitialised contiguous tensor of `shape` and `dtype`, sharing the arena's storage. Throws
    // std::logic_error when the arena has no room left for it.
    at::Tensor take(at::IntArrayRef shape, at::ScalarType dtype);

private:
    at::Tensor bytes_;
    uint64_t used_ = 0;
};

// Each CPU tensor of `tensors` (oneDNN's opaque ones excepted) replaced by a contiguous copy of it in one
// HostArena, one at a time, so that the memory held at once is theirs plus one tensor's (for copies that another
// library allocated, as a kernel's packing).
void gather_in_host_pages(const std::vector<at::Tensor *> &tensors);

}  // namespace gpt
