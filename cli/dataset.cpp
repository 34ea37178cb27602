// dataset.cpp — see dataset.h.
#include "dataset.h"

#include <fstream>
#include <stdexcept>

namespace cli {

TokenFile::TokenFile(const std::string &path, int32_t seq) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw std::runtime_error("cannot open " + path + " (run `python -m gpt_aot prepare-data`)");
    const auto bytes = static_cast<size_t>(in.tellg());
    if (bytes % 2 != 0) throw std::runtime_error(path + " is not a file of uint16 token ids");
    tokens_.resize(bytes / 2);
    in.seekg(0);
    in.read(reinterpret_cast<char *>(tokens_.data()), static_cast<std::streamsize>(bytes));
    if (static_cast<size_t>(in.gcount()) != bytes)  // else the rest would train as token 0
        throw std::runtime_error("cannot read " + path + ": got " + std::to_string(in.gcount()) + " of " +
                                 std::to_string(bytes) + " bytes");
    if (tokens_.size() < static_cast<size_t>(seq) + 1)
        throw std::runtime_error(path + " holds fewer tokens than one window of " + std::to_string(seq + 1));
}

void TokenFile::sample(std::mt19937_64 &rng, int32_t rows, int32_t seq, std::vector<gpt_token> *x,
                       std::vector<gpt_token> *y, int rank, int world) const {
    // Every window whose targets fit, the last one included (nanoGPT's randint(len(data) - block_size)).
    const uint64_t starts = tokens_.size() - static_cast<size_t>(seq);
    for (int32_t r = 0; r < rows * world; ++r) {
        const size_t start = static_cast<size_t>(rng() % starts);
        if (r / rows != rank) continue;
        for (int32_t t = 0; t < seq; ++t) {
            x->push_back(tokens_[start + static_cast<size_t>(t)]);
            y->push_back(tokens_[start + static_cast<size_t>(t) + 1]);
        }
    }
}

}  // namespace cli
