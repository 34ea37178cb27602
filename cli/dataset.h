// dataset.h — a nanoGPT token file (uint16 ids, e.g. train.bin) and random
// (x, y) windows from it, as nanoGPT's get_batch draws them.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gpt_runtime.h"

namespace cli {

class TokenFile {
public:
    // Throws std::runtime_error if the file is missing, odd-sized or shorter than seq + 1 tokens.
    TokenFile(const std::string &path, int32_t seq);
    size_t size() const { return tokens_.size(); }

    // Fills x and y with `rows` windows of `seq` tokens; y is x shifted by one.
    // Data-parallel ranks share one rng stream: each draws the windows of all
    // `world` ranks and keeps its own `rows`, so the shards are deterministic,
    // every draw goes to exactly one rank, and together they are the batch one
    // rank would draw with world * rows.
    void sample(std::mt19937_64 &rng, int32_t rows, int32_t seq, std::vector<gpt_token> *x, std::vector<gpt_token> *y,
                int rank = 0, int world = 1) const;

private:
    std::vector<uint16_t> tokens_;
};

}  // namespace cli
