// trainer_rng.h — a trainer's own random generators (the CPU's, and on a GPU also
// the GPU's), lent to torch's default generators for each train_step call.
//
// Why lend rather than pass: an AOTInductor graph takes no generator. The dropout
// masks of the compiled train_step come from seeds Inductor draws with aten.randint
// from the default generator of the device the graph runs on (RandomSeeds in
// torch/_inductor/ir.py; ops it leaves to aten, such as bernoulli_ on CPU, draw from
// it as well). So for the duration of a call the default generators hold the
// trainer's states, and afterwards the trainer keeps what the call drew and the
// defaults get their own states back: each trainer's masks depend on its seed and
// its checkpoints only, not on other trainers or on whoever else seeds torch.
#pragma once

#include <ATen/Tensor.h>
#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace gpt {

class TrainerRng {
public:
    // The CPU generator, and for a GPU `device` that device's too, each seeded with `seed`
    // as torch's manual_seed seeds the default ones: a trainer alone draws the masks it
    // drew when it seeded the default generators itself.
    TrainerRng(c10::Device device, uint64_t seed);
    TrainerRng(TrainerRng &&) noexcept = default;
    TrainerRng &operator=(TrainerRng &&) noexcept = default;
    // Copies of a Generator share its state: a copy would be a second handle, not a second generator.
    TrainerRng(const TrainerRng &) = delete;
    TrainerRng &operator=(const TrainerRng &) = delete;

    // While a Lease lives, torch's default generators (CPU, and the trainer's GPU) hold this
    // trainer's states. One lease at a time per process, so two trainers' calls never
    // draw from one default generator at once (their calls queue for it). Code outside the
    // runtime that draws from a default generator during a lease draws from the trainer's state.
    class Lease {
    public:
        ~Lease();
        Lease(const Lease &) = delete;
        Lease &operator=(const Lease &) = delete;
        Lease(Lease &&) = delete;
        Lease &operator=(Lease &&) = delete;

    private:
        friend class TrainerRng;
        explicit Lease(TrainerRng &rng);
        void give_back() noexcept;
        std::unique_lock<std::mutex> lock_;
        // (the trainer's generator, the default generator it stands in for, the default's own state)
        std::vector<std::tuple<at::Generator, at::Generator, at::Tensor>> lent_;
    };
    [[nodiscard]] Lease lend();

    // The states a checkpoint carries: "rng.cpu", and "rng.cuda" for a GPU trainer.
    std::map<std::string, at::Tensor> states() const;

    // This trainer's generators with the states of a checkpoint's `tensors` (from
    // `path`, for messages), for rank `rank` of the job resuming it. Throws
    // GPT_ERR_ARTIFACT_INVALID for a missing or malformed rng.cpu or a malformed GPU
    // state, and changes nothing: the caller swaps the result in once every check passed.
    // A checkpoint without the GPU's state (from a CPU trainer, an older runtime, or
    // import-ckpt) leaves the GPU generator as it is, with a warning.
    TrainerRng restored(const std::map<std::string, at::Tensor> &tensors, int rank, const std::string &path) const;

private:
    TrainerRng(at::Generator cpu, at::Generator gpu) : cpu_(std::move(cpu)), gpu_(std::move(gpu)) {}
    // Rank `rank` > 0 resuming from rank 0's states (see restored()).
    void separate_rank(int rank, bool gpu_from_checkpoint);

    at::Generator cpu_;
    at::Generator gpu_;  // undefined for a CPU trainer
};

}  // namespace gpt
