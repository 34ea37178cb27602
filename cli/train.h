// train.h — `gpt train`: nanoGPT's training loop over libgpt_runtime's compiled train step.
#pragma once

#include <cstdint>
#include <string>

#include "common.h"

namespace cli {

struct TrainOptions {
    std::string data_dir;  // train.bin, val.bin
    int iters = 200;
    int batch = 8;
    int block = 0;  // 0 = the model's block_size
    int accum = 1;
    float lr = 1e-3f;
    float min_lr = 1e-4f;
    int warmup = 20;
    int decay_iters = 0;  // 0 = iters
    int eval_every = 50;
    int eval_iters = 10;
    uint64_t seed = 1337;
    int threads = 0;
    std::string ckpt;        // checkpoint file; "" = none
    int ckpt_every = 0;      // steps between checkpoints (0 = only at the end)
    bool resume = false;     // continue from `ckpt` if it exists
    int nproc = 1;           // local ranks to launch (launch.h); ranks find each other through the env
    int dist_timeout = 300;  // seconds a rank waits for its peers before failing
    SampleOptions sample;    // printed after training when sample.n > 0
};

int cmd_train(const std::string &artifact, const TrainOptions &options);

}  // namespace cli
