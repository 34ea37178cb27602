// gpt-server's choice of slot and reused prefix for a new prompt (deploy/server/scheduling/prefix_cache.h).
#include <catch2/catch.hpp>

#include <vector>

#include "scheduling/prefix_cache.h"

using server::place_prompt;
using Tokens = std::vector<gpt_token>;

namespace {

std::vector<const Tokens *> pointers(const std::vector<Tokens> &cached) {
    std::vector<const Tokens *> out;
    for (const Tokens &t : cached) out.push_back(&t);
    return out;
}

}  // namespace

TEST_CASE("common_prefix counts the tokens two sequences start with") {
    CHECK(server::common_prefix({1, 2, 3}, {1, 2, 4, 5}) == 2);
    CHECK(server::common_prefix({}, {1}) == 0);
    CHECK(server::common_prefix({1, 2}, {1, 2}) == 2);
}

TEST_CASE("a prompt goes to the free slot holding the longest prefix of it") {
    const std::vector<Tokens> cached = {{9, 9}, {1, 2, 3, 7}, {1, 2}, {}};
    const auto p = place_prompt(pointers(cached), {true, true, true, true}, {1, 2, 3, 4}, true);
    CHECK(p.slot == 1);
    CHECK(p.source == 1);
    CHECK(p.reused == 3);
}

TEST_CASE("the last prompt token is never reused: it runs for the next token's logits") {
    const std::vector<Tokens> cached = {{1, 2, 3, 4, 5}};
    const auto p = place_prompt(pointers(cached), {true}, {1, 2, 3}, true);
    CHECK(p.slot == 0);
    CHECK(p.reused == 2);
}

TEST_CASE("a longer prefix in another slot, busy or free, is copied into the chosen one") {
    const std::vector<Tokens> cached = {{1, 2, 3, 4, 8}, {5}, {1}};
    const auto p = place_prompt(pointers(cached), {false, true, true}, {1, 2, 3, 4, 6}, true);
    CHECK(p.slot == 2);  // shares one token; slot 1 shares none
    CHECK(p.source == 0);
    CHECK(p.reused == 4);
}

TEST_CASE("among equal matches the slot holding the fewest tokens loses least, then the lowest") {
    const std::vector<Tokens> cached = {{7, 7, 7}, {8}, {}, {}};
    CHECK(place_prompt(pointers(cached), {true, true, true, true}, {1, 2}, true).slot == 2);
    CHECK(place_prompt(pointers(cached), {true, true, false, false}, {1, 2}, true).slot == 1);
}

TEST_CASE("among equal matches the slot beside the busy ones comes first: every step runs their range") {
    // Slots 2 and 3 busy; 0 and 5 hold long caches, 1, 4 and 6 are empty.
    const std::vector<Tokens> cached = {{7, 7, 7, 7}, {}, {5}, {6}, {}, {8, 8, 8, 8}, {}};
    const std::vector<bool> free = {true, true, false, false, true, true, true};
    CHECK(place_prompt(pointers(cached), free, {1, 2}, true).slot == 1);  // 1 and 4 widen by one: 1 is lower
    const std::vector<bool> right_only = {false, false, false, false, true, true, true};
    CHECK(place_prompt(pointers(cached), right_only, {1, 2}, true).slot == 4);
    // Next to the range but holding a long cache still beats a slot further out: the width costs every step.
    const std::vector<bool> beside_cache = {false, false, false, false, false, true, true};
    CHECK(place_prompt(pointers(cached), beside_cache, {1, 2}, true).slot == 5);
    // A longer shared prefix still decides first.
    CHECK(place_prompt(pointers(cached), free, {8, 8, 9}, true).slot == 5);
}

TEST_CASE("without reuse the lowest free slot takes the prompt whole, and no free slot is -1") {
    const std::vector<Tokens> cached = {{1, 2, 3}, {1, 2, 3}, {}};
    const auto p = place_prompt(pointers(cached), {false, true, true}, {1, 2, 3, 4}, false);
    CHECK(p.slot == 1);
    CHECK(p.reused == 0);
    CHECK(place_prompt(pointers(cached), {false, false, false}, {1}, true).slot == -1);
    CHECK(place_prompt(pointers(cached), {false, false, false}, {1}, false).slot == -1);
}
