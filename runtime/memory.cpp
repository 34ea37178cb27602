// memory.cpp — device counters from torch's CUDA caching allocator, host peak from getrusage.
#include "memory.h"

#include <sys/resource.h>

#ifdef GPT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace gpt {

DeviceMemory device_memory(c10::Device device) {
    DeviceMemory m;
#ifdef GPT_WITH_CUDA
    if (device.is_cuda()) {
        using c10::CachingAllocator::StatType;
        const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
        const auto all = static_cast<size_t>(StatType::AGGREGATE);
        m.allocated = static_cast<uint64_t>(stats.allocated_bytes[all].current);
        m.peak = static_cast<uint64_t>(stats.allocated_bytes[all].peak);
        m.reserved = static_cast<uint64_t>(stats.reserved_bytes[all].current);
    }
#else
    (void)device;
#endif
    return m;
}

int64_t device_oom_count(c10::Device device) {
#ifdef GPT_WITH_CUDA
    if (device.is_cuda()) return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index()).num_ooms;
#else
    (void)device;
#endif
    return 0;
}

void reset_device_peak(c10::Device device) {
#ifdef GPT_WITH_CUDA
    if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#else
    (void)device;
#endif
}

uint64_t host_peak_rss() {
    struct rusage usage {};
    if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
    return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace gpt
