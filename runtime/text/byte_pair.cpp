// byte_pair.cpp — the merge loop, twice: tiktoken's scan for ordinary pieces and
// a heap for long ones (same order of merges: lowest rank, then leftmost).
#include "text/byte_pair.h"

#include <limits>
#include <queue>

#include "base/error.h"

namespace gpt {

namespace {

constexpr gpt_token kNoRank = std::numeric_limits<gpt_token>::max();
// Longer pieces go to the heap. Natural-language pieces are a few bytes; the
// scan is faster there, and this bounds its worst case at ~n^2 = 65k probes.
constexpr size_t kScanLimit = 256;

gpt_token rank_of(const RankTable &ranks, std::string_view bytes) {
    const gpt_token r = ranks.find(bytes);
    return r < 0 ? kNoRank : r;
}

void emit(std::string_view bytes, const RankTable &ranks, std::vector<gpt_token> &out) {
    const gpt_token r = ranks.find(bytes);
    if (r < 0) fail(GPT_ERR_INTERNAL, "byte-pair merge produced bytes that are not a token");
    out.push_back(r);
}

}  // namespace

size_t RankTable::Hash::operator()(std::string_view s) const noexcept {
    // FNV-1a over the bytes: tokens are short, and this is cheap and well spread for them.
    uint64_t h = 14695981039346656037ull;
    for (const char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    return static_cast<size_t>(h);
}

bool RankTable::add(std::string bytes, gpt_token id) {
    if (ranks_.count(bytes)) return false;
    const std::string &kept = storage_.emplace_back(std::move(bytes));
    ranks_.emplace(std::string_view(kept), id);
    return true;
}

void byte_pair_encode_scan(std::string_view piece, const RankTable &ranks, std::vector<gpt_token> &out) {
    // parts[i] = (start of part i, rank of part i joined with part i+1).
    struct Part {
        size_t start;
        gpt_token rank;
    };
    std::vector<Part> parts;
    parts.reserve(piece.size() + 1);
    for (size_t i = 0; i + 1 < piece.size(); ++i) parts.push_back({i, rank_of(ranks, piece.substr(i, 2))});
    parts.push_back({piece.size() - 1, kNoRank});
    parts.push_back({piece.size(), kNoRank});
    // Rank of part i joined with part i+1, given the parts as they are now.
    const auto joined_rank = [&](size_t i) {
        if (i + 2 >= parts.size()) return kNoRank;
        return rank_of(ranks, piece.substr(parts[i].start, parts[i + 2].start - parts[i].start));
    };
    for (;;) {
        size_t best = 0;
        gpt_token best_rank = kNoRank;
        for (size_t i = 0; i + 1 < parts.size(); ++i)
            if (parts[i].rank < best_rank) best_rank = parts[i].rank, best = i;
        if (best_rank == kNoRank) break;
        parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
        parts[best].rank = joined_rank(best);
        if (best > 0) parts[best - 1].rank = joined_rank(best - 1);
    }
    for (size_t i = 0; i + 1 < parts.size(); ++i)
        emit(piece.substr(parts[i].start, parts[i + 1].start - parts[i].start), ranks, out);
}

void byte_pair_encode_heap(std::string_view piece, const RankTable &ranks, std::vector<gpt_token> &out) {
    // A doubly linked list of parts; a part is named by its start byte, which
    // never changes while it lives (merging keeps the left part's start).
    const size_t n = piece.size();
    std::vector<size_t> next(n + 1), prev(n);  // n = none; next[n] = n keeps next[next[i]] defined
    std::vector<bool> alive(n, true);
    for (size_t i = 0; i < n; ++i) next[i] = i + 1, prev[i] = i == 0 ? n : i - 1;
    next[n] = n;
    // The bytes of part i joined with its successor, and their rank.
    const auto joined_rank = [&](size_t i) {
        if (i >= n || next[i] >= n) return kNoRank;
        return rank_of(ranks, piece.substr(i, next[next[i]] - i));
    };
    struct Candidate {
        gpt_token rank;
        size_t start;
        gpt_token expected;  // rank when queued; a changed neighbour makes the entry stale
        bool operator>(const Candidate &o) const { return rank != o.rank ? rank > o.rank : start > o.start; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    std::vector<gpt_token> current(n, kNoRank);
    for (size_t i = 0; i + 1 < n; ++i) {
        current[i] = joined_rank(i);
        if (current[i] != kNoRank) heap.push({current[i], i, current[i]});
    }
    while (!heap.empty()) {
        const Candidate c = heap.top();
        heap.pop();
        if (!alive[c.start] || current[c.start] != c.expected) continue;  // stale
        const size_t i = c.start, j = next[i];
        alive[j] = false;
        next[i] = next[j];
        if (next[i] < n) prev[next[i]] = i;
        current[i] = joined_rank(i);
        if (current[i] != kNoRank) heap.push({current[i], i, current[i]});
        if (prev[i] < n) {
            const size_t p = prev[i];
            current[p] = joined_rank(p);
            if (current[p] != kNoRank) heap.push({current[p], p, current[p]});
        }
    }
    for (size_t i = 0; i < n; i = next[i]) emit(piece.substr(i, next[i] - i), ranks, out);
}

void byte_pair_encode(std::string_view piece, const RankTable &ranks, std::vector<gpt_token> &out) {
    if (piece.size() == 1) return emit(piece, ranks, out);
    if (piece.size() <= kScanLimit) return byte_pair_encode_scan(piece, ranks, out);
    byte_pair_encode_heap(piece, ranks, out);
}

}  // namespace gpt
