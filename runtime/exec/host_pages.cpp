// host_pages.cpp — see host_pages.h.
#include "exec/host_pages.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/strides.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>

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

uint64_t HostArena::slot_bytes(at::IntArrayRef shape, at::ScalarType dtype) {
    uint64_t bytes = c10::elementSize(dtype);
    for (const int64_t size : shape) bytes *= static_cast<uint64_t>(size);
    return (bytes + ALIGN - 1) / ALIGN * ALIGN;
}

HostArena::HostArena(uint64_t bytes)
    : bytes_(empty_in_host_pages({static_cast<int64_t>(std::max<uint64_t>(bytes, 1))}, at::kByte)) {}

at::Tensor HostArena::take(at::IntArrayRef shape, at::ScalarType dtype) {
    const uint64_t slot = slot_bytes(shape, dtype);
    if (used_ + slot > static_cast<uint64_t>(bytes_.numel()))
        throw std::logic_error("HostArena::take: no room for " + std::to_string(slot) + " bytes past " +
                               std::to_string(used_) + " of " + std::to_string(bytes_.numel()));
    at::Tensor t = at::empty({0}, at::TensorOptions().dtype(dtype));
    // Offsets are multiples of ALIGN, so of every element size: the storage offset counts whole elements.
    t.set_(bytes_.storage(), static_cast<int64_t>(used_ / c10::elementSize(dtype)), shape,
           c10::contiguous_strides(shape));
    used_ += slot;
    return t;
}

void gather_in_host_pages(const std::vector<at::Tensor *> &tensors) {
    const auto movable = [](const at::Tensor &t) { return t.defined() && t.device().is_cpu() && !t.is_mkldnn(); };
    uint64_t bytes = 0;
    for (const at::Tensor *t : tensors)
        if (movable(*t)) bytes += HostArena::slot_bytes(t->sizes(), t->scalar_type());
    if (bytes == 0) return;
    HostArena arena(bytes);
    for (at::Tensor *t : tensors) {
        if (!movable(*t)) continue;
        at::Tensor copy = arena.take(t->sizes(), t->scalar_type());
        copy.copy_(*t);
        *t = std::move(copy);  // the old memory goes here, unless something else holds it
    }
}

}  // namespace gpt
