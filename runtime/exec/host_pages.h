// host_pages.h — CPU tensors in 2 MiB pages, for what every decode step walks through: the weights and the KV
// caches. A batch-1 step of GPT-2 124M reads ~250 MB spread over ~60 000 4-KiB pages, a TLB miss and a page walk
// each, and the hardware prefetchers stop at every 4-KiB boundary; in 2 MiB pages it is ~125 pages.
#pragma once

#include <ATen/Tensor.h>

namespace gpt {

// An uninitialised CPU tensor of `shape` and `dtype`, contiguous. Of 2 MiB or more, its memory is mapped apart,
// aligned to 2 MiB, and the whole 2 MiB spans in it are offered to the kernel's transparent huge pages
// (madvise(MADV_HUGEPAGE): honoured where THP is `always` or `madvise`, a no-op where `never`); the tail stays in
// small pages, so nothing past the tensor becomes resident. Smaller ones come from torch's allocator. The mapping
// is unmapped when the last tensor sharing it goes. Throws std::bad_alloc when the memory cannot be mapped.
at::Tensor empty_in_host_pages(at::IntArrayRef shape, at::ScalarType dtype);

// `t` itself unless it is a CPU tensor of 2 MiB or more: then a contiguous copy in empty_in_host_pages's memory
// (for tensors another library allocated, as a kernel's packing).
at::Tensor in_host_pages(const at::Tensor &t);

}  // namespace gpt
