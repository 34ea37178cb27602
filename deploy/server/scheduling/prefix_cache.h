// prefix_cache.h — where a new request's prompt starts: which slot takes it and how much of it a
// sequence's cache already holds. Longest-prefix match per slot, as llama.cpp's server (cache_prompt):
// a slot keeps its tokens' cache after its request ends, and a prompt that begins as one of them
// (a system prompt, few-shot examples, a conversation's earlier turns) reuses that cache instead of
// computing it again. Chosen over vLLM's hashed blocks because the cache is one contiguous row per
// sequence (runtime/exec/session.h): a block table would need paged attention in the graphs, while a
// prefix per slot needs only truncate, copy and extend, and serves the common case of one shared
// prefix per slot.
#pragma once

#include <cstddef>
#include <vector>

#include "gpt_runtime.h"

namespace server {

// Slot `slot` takes the prompt. Its sequence first holds the prompt's first `reused` tokens: copied
// from slot `source` when source != slot, else the slot's own (truncated to them); the rest is prefilled.
struct PromptPlacement {
    int slot = -1;  // -1: no slot is free
    int source = -1;
    size_t reused = 0;
};

// Tokens a and b have in common at their start.
size_t common_prefix(const std::vector<gpt_token> &a, const std::vector<gpt_token> &b);

// cached[i]: the tokens slot i's sequence holds; free[i]: whether slot i can take the prompt.
// With `reuse`: the free slot sharing the longest prefix with the prompt (ties: the one that widens the busy
// slots' range least, since every decode step runs that range; then the one holding the fewest tokens, which
// loses least; then the lowest), whose prefix is copied from any other slot, busy or free, that shares more. At most
// prompt.size() - 1 tokens are reused: the last one runs for its logits. Without: the lowest free slot, nothing reused
// (each prompt prefilled whole, as a lone session would).
PromptPlacement place_prompt(const std::vector<const std::vector<gpt_token> *> &cached, const std::vector<bool> &free,
                             const std::vector<gpt_token> &prompt, bool reuse);

}  // namespace server
