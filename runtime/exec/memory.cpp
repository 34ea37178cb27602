// memory.cpp — device counters from torch's CUDA caching allocator, host peak from getrusage.
#include "exec/memory.h"

#include <sys/resource.h>

#ifdef GPT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace gpt {

#ifdef GPT_WITH_CUDA

DeviceMemory device_memory(c10::Device device) {
    if (!device.is_cuda()) return {};
    using c10::CachingAllocator::StatType;
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    const auto all = static_cast<size_t>(StatType::AGGREGATE);
    return {static_cast<uint64_t>(stats.allocated_bytes[all].current),
            static_cast<uint64_t>(stats.allocated_bytes[all].peak),
            static_cast<uint64_t>(stats.reserved_bytes[all].current)};
}

int64_t device_oom_count(c10::Device device) {
    return device.is_cuda() ? c10::cuda::CUDACachingAllocator::getDeviceStats(device.index()).num_ooms : 0;
}

void reset_device_peak(c10::Device device) {
    if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

#else  // built without CUDA: no model can be on a GPU

DeviceMemory device_memory(c10::Device) { return {}; }
int64_t device_oom_count(c10::Device) { return 0; }
void reset_device_peak(c10::Device) {}

#endif

uint64_t host_peak_rss() {
    struct rusage usage {};
    if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
    return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace gpt
