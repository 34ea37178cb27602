// host_pages.cpp — see host_pages.h.
#include "exec/host_pages.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace gpt {

namespace {

constexpr uint64_t HUGE_PAGE = uint64_t{2} << 20;

}  // namespace

at::Tensor empty_in_host_pages(at::IntArrayRef shape, at::ScalarType dtype) {
    const auto options = at::TensorOptions().dtype(dtype);
    uint64_t bytes = c10::elementSize(dtype);
    for (const int64_t size : shape) bytes *= static_cast<uint64_t>(size);
    if (bytes < HUGE_PAGE) return at::empty(shape, options);
    // One huge page more than asked, so that an aligned start fits; the slack before it and after the tensor's
    // last page goes back at once.
    const uint64_t pages_bytes = (bytes + 4095) / 4096 * 4096;
    const uint64_t mapped = pages_bytes + HUGE_PAGE;
    void *mapping = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED) throw std::bad_alloc();
    char *base = static_cast<char *>(mapping);
    const uint64_t skip = (HUGE_PAGE - reinterpret_cast<uintptr_t>(base) % HUGE_PAGE) % HUGE_PAGE;
    if (skip > 0) munmap(base, skip);
    char *data = base + skip;
    if (mapped > skip + pages_bytes) munmap(data + pages_bytes, mapped - skip - pages_bytes);
    madvise(data, bytes / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE);  // advice: where it fails, small pages serve
    return at::from_blob(
        data, shape, [pages_bytes](void *p) { munmap(p, pages_bytes); }, options);
}

at::Tensor in_host_pages(const at::Tensor &t) {
    if (!t.device().is_cpu() || t.is_mkldnn() || t.nbytes() < HUGE_PAGE) return t;
    at::Tensor copy = empty_in_host_pages(t.sizes(), t.scalar_type());
    copy.copy_(t);
    return copy;
}

}  // namespace gpt
