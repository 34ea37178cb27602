// clock.h — the one clock the server measures deadlines and latencies with.
#pragma once

#include <chrono>

namespace server {

using Clock = std::chrono::steady_clock;

inline Clock::duration seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace server
