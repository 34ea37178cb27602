// gpt — command-line front end to libgpt_runtime, using only the public C API.
//   gpt info ART | gpt verify ART | gpt generate ART --prompt TEXT|--prompt-ids ID... -n N --seed S
//     (each with --allow-cpu-fallback: on a GPU host without an artifact for its arch, take the CPU one)
//   gpt train ART --data DIR --iters N [--nproc R] ...
//   gpt artifacts list|inspect|select MODEL_DIR
// ART is an artifact directory or a model directory (one artifact per target).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "artifacts.h"
#include "common.h"
#include "launch.h"
#include "train.h"

namespace {

using cli::LoadedModel;
using cli::report;

int cmd_info(const std::string &dir, bool allow_cpu_fallback) {
    LoadedModel m(dir, 0, allow_cpu_fallback);
    if (m.status != GPT_OK) return report(m.status);
    gpt_model_info info;
    if (gpt_status s = gpt_model_get_info(m.model, &info, sizeof info); s != GPT_OK) return report(s);
    std::printf(
        "artifact     %s\nname         %s\ntarget       %s %s\ndtype        %s\nweights      %s\nkv_cache     %s\n"
        "attention    %s\ntorch        %s (runtime %s)\ntokenizer    %s\nvocab_size   %d\nblock_size   %d\n"
        "n_layer      %d\nn_head       %d\nn_embd       %d\nmax_batch    %d\n",
        dir.c_str(), info.name, info.device, info.arch, info.dtype, info.weights, info.kv_cache, info.attention,
        info.torch_version, gpt_runtime_version(), info.tokenizer, info.vocab_size, info.block_size, info.n_layer,
        info.n_head, info.n_embd, info.max_batch);
    if (info.eos_token != GPT_TOKEN_NONE)
        std::printf("eos_token    %d\n", info.eos_token);
    else
        std::printf("eos_token    none\n");
    return 0;
}

int cmd_verify(const std::string &dir, bool allow_cpu_fallback) {
    LoadedModel m(dir, 0, allow_cpu_fallback);
    if (m.status != GPT_OK) return report(m.status);
    double err = 0.0;
    const gpt_status s = gpt_model_verify(m.model, &err);
    if (s != GPT_OK) return report(s);
    std::printf("golden vector OK (max abs error %.3g)\n", err);
    return 0;
}

int cmd_generate(const std::string &dir, const cli::SampleOptions &o, int threads, bool allow_cpu_fallback) {
    if (const std::string problem = cli::sample_options_problem(o); !problem.empty()) {
        std::fprintf(stderr, "gpt: %s: %s\n", gpt_status_to_string(GPT_ERR_INVALID_ARGUMENT), problem.c_str());
        return 1;
    }
    LoadedModel m(dir, threads, allow_cpu_fallback);
    if (m.status != GPT_OK) return report(m.status);
    const gpt_status s = cli::stream_sample(m.model, o);
    return s == GPT_OK ? 0 : report(s);
}

void add_sample_options(CLI::App *cmd, cli::SampleOptions *o) {
    auto *text = cmd->add_option("--prompt,-p", o->prompt, "prompt text");
    cmd->add_option("--prompt-ids", o->prompt_ids, "prompt as token ids, e.g. --prompt-ids 15496 11 995")
        ->excludes(text);
    cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating when the model samples its end-of-text token");
    cmd->add_option("--seed", o->seed, "sampling seed");
    // Ranges are the runtime's, checked by sample_options_problem before the model is loaded.
    cmd->add_option("--temperature", o->temperature, "0 = greedy, else > 0");
    cmd->add_option("--top-k", o->top_k, "0 = off");
    cmd->add_option("--top-p", o->top_p, "in (0, 1]; 1 = off");
}

int run(int argc, char **argv) {
    CLI::App app{"gpt: run ahead-of-time compiled GPT artifacts"};
    app.require_subcommand(1);
    std::string artifact;
    cli::SampleOptions gen;
    int threads = 0;
    bool allow_cpu_fallback = false;
    cli::TrainOptions tr;
    tr.sample.n = 0;

    auto *info = app.add_subcommand("info", "describe an artifact");
    info->add_option("artifact", artifact, "artifact directory (model_artifacts/<name>/<target>)")->required();
    auto *verify = app.add_subcommand("verify", "run the golden vector; exit 0 only if it matches");
    verify->add_option("artifact", artifact, "artifact directory")->required();

    auto *generate = app.add_subcommand("generate", "generate text from a prompt");
    generate->add_option("artifact", artifact, "artifact directory")->required();
    generate->add_option("-n,--max-new-tokens", gen.n, "tokens to generate (> 0)");
    generate->add_option("--threads", threads, "CPU threads, 0 = default")->check(CLI::NonNegativeNumber);
    add_sample_options(generate, &gen);
    for (CLI::App *cmd : {info, verify, generate})
        cmd->add_flag("--allow-cpu-fallback", allow_cpu_fallback, "take the CPU artifact when none fits the GPU");

    auto *train = app.add_subcommand("train", "train the artifact's model (needs an artifact compiled with --train)");
    train->add_option("artifact", artifact, "artifact directory")->required();
    train->add_option("--data", tr.data_dir, "dataset directory with train.bin and val.bin")->required();
    train->add_option("--iters", tr.iters, "optimizer steps")->check(CLI::PositiveNumber);
    train->add_option("--batch", tr.batch, "sequences per micro-batch")->check(CLI::PositiveNumber);
    train->add_option("--block", tr.block, "sequence length, 0 = the model's block_size")
        ->check(CLI::NonNegativeNumber);
    train->add_option("--accum", tr.accum, "gradient accumulation steps")->check(CLI::PositiveNumber);
    train->add_option("--lr", tr.lr, "peak learning rate");
    train->add_option("--min-lr", tr.min_lr, "final learning rate of the cosine decay");
    train->add_option("--warmup", tr.warmup, "linear warm-up steps")->check(CLI::NonNegativeNumber);
    train->add_option("--decay-iters", tr.decay_iters, "steps of cosine decay, 0 = --iters");
    train->add_option("--eval-every", tr.eval_every, "steps between evaluations")->check(CLI::PositiveNumber);
    train->add_option("--eval-iters", tr.eval_iters, "batches per evaluation")->check(CLI::PositiveNumber);
    train->add_option("--seed", tr.seed, "data order and dropout seed");
    train->add_option("--threads", tr.threads, "CPU threads, 0 = default")->check(CLI::NonNegativeNumber);
    train->add_option("--ckpt", tr.ckpt, "checkpoint file, written atomically at the end and every --ckpt-every");
    train->add_option("--ckpt-every", tr.ckpt_every, "steps between checkpoints")->check(CLI::NonNegativeNumber);
    train->add_flag("--resume", tr.resume, "continue from --ckpt when it exists");
    train->add_option("--nproc", tr.nproc, "data-parallel ranks to run on this machine (Gloo on CPU, NCCL on CUDA)")
        ->check(CLI::PositiveNumber);
    train->add_option("--dist-timeout", tr.dist_timeout, "seconds a rank waits for its peers before failing")
        ->check(CLI::Range(1, 86400));
    train->add_option("--sample-prompt", tr.sample.prompt, "prompt for the sample printed after training");
    train->add_option("--sample-tokens", tr.sample.n, "tokens to sample after training (0 = none)");

    cli::ArtifactsOptions art;
    auto *artifacts = app.add_subcommand("artifacts", "ops view of a model directory's per-target artifacts");
    artifacts->require_subcommand(1);
    auto *list = artifacts->add_subcommand("list", "targets, versions, sizes and whether each loads here");
    auto *inspect = artifacts->add_subcommand("inspect", "full JSON report, every file's sha256 checked");
    auto *select = artifacts->add_subcommand("select", "print the artifact directory this machine would load");
    for (CLI::App *cmd : {list, inspect, select}) {
        cmd->add_option("path", art.path, "model directory (model_artifacts/<name>) or one artifact")->required();
        cmd->add_flag("--allow-cpu-fallback", art.allow_cpu_fallback, "take the CPU artifact when none fits the GPU");
    }
    list->add_flag("--check-hashes", art.check_hashes, "read every file and check its sha256");

    CLI11_PARSE(app, argc, argv);
    if (*list) return cli::cmd_artifacts_list(art);
    if (*inspect) return cli::cmd_artifacts_inspect(art);
    if (*select) return cli::cmd_artifacts_select(art);
    if (*info) return cmd_info(artifact, allow_cpu_fallback);
    if (*verify) return cmd_verify(artifact, allow_cpu_fallback);
    if (*train && tr.nproc > 1) return cli::launch_local_ranks(tr.nproc, argc, argv);
    if (*train) return cli::cmd_train(artifact, tr);
    return cmd_generate(artifact, gen, threads, allow_cpu_fallback);
}

}  // namespace

int main(int argc, char **argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "gpt: %s\n", e.what());
        return 1;
    }
}
