// prefix_cache.cpp — see prefix_cache.h.
#include "scheduling/prefix_cache.h"

#include <algorithm>

namespace server {

size_t common_prefix(const std::vector<gpt_token> &a, const std::vector<gpt_token> &b) {
    const size_t n = std::min(a.size(), b.size());
    return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first -
                               a.begin());
}

PromptPlacement place_prompt(const std::vector<const std::vector<gpt_token> *> &cached, const std::vector<bool> &free,
                             const std::vector<gpt_token> &prompt, bool reuse) {
    PromptPlacement placement;
    if (!reuse) {
        const auto lowest = std::find(free.begin(), free.end(), true);
        if (lowest != free.end()) placement.slot = static_cast<int>(lowest - free.begin());
        return placement;
    }
    const size_t most = prompt.empty() ? 0 : prompt.size() - 1;
    std::vector<size_t> shared(cached.size());
    for (size_t i = 0; i < cached.size(); ++i) shared[i] = std::min(common_prefix(*cached[i], prompt), most);
    // The busy slots' range: a decode step runs every row from the first stepping slot to the last, so a slot
    // outside it widens every step of the running requests (gpt_session_decode_batch).
    const auto first_busy = std::find(free.begin(), free.end(), false);
    const auto lo = static_cast<size_t>(first_busy - free.begin());
    const auto hi = first_busy == free.end()
                        ? lo
                        : static_cast<size_t>(free.rend() - std::find(free.rbegin(), free.rend(), false)) - 1;
    const auto widening = [&](size_t i) {
        return first_busy == free.end() ? size_t{0} : (i < lo ? lo - i : i > hi ? i - hi : 0);
    };
    for (size_t i = 0; i < cached.size(); ++i) {
        if (!free[i]) continue;
        const auto best = static_cast<size_t>(placement.slot);
        if (placement.slot < 0 || shared[i] > shared[best] ||
            (shared[i] == shared[best] && (widening(i) < widening(best) || (widening(i) == widening(best) &&
                                                                            cached[i]->size() < cached[best]->size()))))
            placement.slot = static_cast<int>(i);
    }
    if (placement.slot < 0) return placement;
    placement.source = placement.slot;
    placement.reused = shared[static_cast<size_t>(placement.slot)];
    for (size_t i = 0; i < cached.size(); ++i) {
        if (shared[i] > placement.reused) {
            placement.source = static_cast<int>(i);
            placement.reused = shared[i];
        }
    }
    return placement;
}

}  // namespace server
