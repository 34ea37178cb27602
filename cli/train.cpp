// train.cpp — data sampling, progress line, periodic evaluation, summary. Run as
// one rank of data-parallel training when WORLD_SIZE is set (see launch.h): every
// rank trains on its shard; rank 0 alone evaluates, prints and writes checkpoints.
#include "train.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "dataset.h"

namespace cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string clock_time(double seconds) {
    const long s = std::lround(seconds);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    return buf;
}

// Mean loss over `iters` random batches, as nanoGPT's estimate_loss().
gpt_status estimate_loss(gpt_trainer *trainer, const TokenFile &data, std::mt19937_64 &rng, const TrainOptions &o,
                         int32_t seq, float *out) {
    double sum = 0.0;
    std::vector<gpt_token> x, y;
    for (int i = 0; i < o.eval_iters; ++i) {
        x.clear();
        y.clear();
        data.sample(rng, o.batch, seq, &x, &y);
        float loss = 0.0f;
        if (gpt_status s = gpt_trainer_eval(trainer, x.data(), y.data(), o.batch, seq, &loss); s != GPT_OK) return s;
        sum += loss;
    }
    *out = static_cast<float>(sum / o.eval_iters);
    return GPT_OK;
}

void print_progress(int it, int total, float loss, double tokens_per_s, double ms_per_iter, bool tty) {
    const int width = 24;
    const int filled = total > 0 ? width * it / total : width;
    std::string bar(static_cast<size_t>(filled), '=');
    bar.resize(static_cast<size_t>(width), ' ');
    const double eta = ms_per_iter * (total - it) / 1000.0;
    std::printf("%siter %d/%d [%s] loss %.4f | %.0f tok/s | %.1f ms/iter | ETA %s%s", tty ? "\r" : "", it, total,
                bar.c_str(), loss, tokens_per_s, ms_per_iter, clock_time(eta).c_str(), tty ? "" : "\n");
    std::fflush(stdout);
}

}  // namespace

int cmd_train(const std::string &artifact, const TrainOptions &o) {
    const bool tty = isatty(fileno(stdout)) != 0;
    const int log_every = std::max(10, o.iters / 40);
    LoadedModel m(artifact, o.threads, false);
    if (m.status != GPT_OK) return report(m.status);
    gpt_model_info info;
    if (gpt_status s = gpt_model_get_info(m.model, &info, sizeof info); s != GPT_OK) return report(s);
    const int32_t seq = o.block > 0 ? o.block : info.block_size;

    std::unique_ptr<TokenFile> train, val;
    try {
        train = std::make_unique<TokenFile>(o.data_dir + "/train.bin", seq);
        val = std::make_unique<TokenFile>(o.data_dir + "/val.bin", seq);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "gpt: %s\n", e.what());
        return 1;
    }

    gpt_trainer_params tp;

    gpt_trainer_default_params(&tp, sizeof tp);
    tp.learning_rate = o.lr;
    tp.min_lr = o.min_lr;
    tp.warmup_iters = o.warmup;
    tp.lr_decay_iters = o.decay_iters > 0 ? o.decay_iters : o.iters;
    tp.seed = o.seed;
    gpt_dist_params dist;
    gpt_dist_default_params(&dist, sizeof dist);
    const bool distributed = std::getenv("WORLD_SIZE") != nullptr;
    if (distributed) {
        if (gpt_status s = gpt_dist_params_from_env(&dist); s != GPT_OK) return report(s);
        dist.timeout_ms = o.dist_timeout * 1000;
    }
    const int rank = dist.rank, world = dist.world_size;
    const bool lead = rank == 0;
    gpt_trainer *trainer = nullptr;
    if (gpt_status s = distributed ? gpt_trainer_create_distributed(m.model, &tp, &dist, &trainer)
                                   : gpt_trainer_create(m.model, &tp, &trainer);
        s != GPT_OK)
        return report(s);
    std::unique_ptr<gpt_trainer, decltype(&gpt_trainer_free)> owner(trainer, gpt_trainer_free);

    // Every rank loads the checkpoint (they must agree on the iteration); only rank 0 writes one.
    int first_iter = 0;
    if (o.resume && !o.ckpt.empty() && access(o.ckpt.c_str(), F_OK) == 0) {
        if (gpt_status s = gpt_trainer_load(trainer, o.ckpt.c_str()); s != GPT_OK) return report(s);
        gpt_trainer_state state;
        gpt_trainer_get_state(trainer, &state, sizeof state);
        first_iter = static_cast<int>(state.iteration);
        if (lead) std::printf("resumed from %s at iteration %d\n", o.ckpt.c_str(), first_iter);
    }
    auto save = [&](int it) {
        if (o.ckpt.empty() || !lead) return GPT_OK;
        const gpt_status s = gpt_trainer_save(trainer, o.ckpt.c_str());
        if (s == GPT_OK) std::printf("%scheckpoint %s (iteration %d)\n", tty ? "\n" : "", o.ckpt.c_str(), it);
        return s;
    };
    if (lead)
        std::printf(
            "training %s (%d layers, %d embd) on %s: %zu train / %zu val tokens, batch %d x %d, accum %d, %d rank(s)\n",
            info.name, info.n_layer, info.n_embd, o.data_dir.c_str(), train->size(), val->size(), o.batch, seq, o.accum,
            world);
    std::mt19937_64 rng(o.seed + static_cast<uint64_t>(first_iter)), eval_rng(o.seed + 1);
    const double tokens_per_iter = static_cast<double>(o.batch) * seq * o.accum * world;  // over all ranks
    float first_val = 0.0f, last_train = 0.0f, last_val = 0.0f, loss = 0.0f;
    std::vector<gpt_token> x, y;
    const auto start = Clock::now();
    double train_seconds = 0.0;

    for (int it = first_iter; it <= o.iters; ++it) {
        if (lead && (it % o.eval_every == 0 || it == o.iters)) {
            gpt_status s = estimate_loss(trainer, *train, eval_rng, o, seq, &last_train);
            if (s == GPT_OK) s = estimate_loss(trainer, *val, eval_rng, o, seq, &last_val);
            if (s != GPT_OK) return report(s);
            if (it == first_iter) first_val = last_val;
            std::printf("%seval iter %d: train loss %.4f, val loss %.4f\n", tty && it > 0 ? "\n" : "", it, last_train,
                        last_val);
        }
        if (it == o.iters) break;
        if (o.ckpt_every > 0 && it > first_iter && it % o.ckpt_every == 0)
            if (gpt_status s = save(it); s != GPT_OK) return report(s);
        x.clear();
        y.clear();
        train->sample(rng, o.batch * o.accum, seq, &x, &y, rank, world);
        const auto step_start = Clock::now();
        if (gpt_status s = gpt_trainer_step(trainer, x.data(), y.data(), o.batch, seq, o.accum, &loss); s != GPT_OK)
            return report(s);
        train_seconds += seconds_since(step_start);
        const int done = it + 1, steps = done - first_iter;
        if (lead && (tty || done % log_every == 0 || done == o.iters))
            print_progress(done, o.iters, loss, tokens_per_iter * steps / train_seconds, 1000.0 * train_seconds / steps,
                           tty);
    }
    if (gpt_status s = save(o.iters); s != GPT_OK) return report(s);
    if (!lead) return 0;
    const int steps = std::max(o.iters - first_iter, 1);
    std::printf("done: %d iterations in %s (%.1f ms/iter, %.0f tok/s); val loss %.4f -> %.4f, train loss %.4f\n", steps,
                clock_time(seconds_since(start)).c_str(), 1000.0 * train_seconds / steps,
                tokens_per_iter * steps / std::max(train_seconds, 1e-9), first_val, last_val, last_train);
    if (o.sample.n > 0) {
        std::printf("sample:\n");
        if (gpt_status s = stream_sample(m.model, o.sample); s != GPT_OK) return report(s);
    }
    return 0;
}

}  // namespace cli
