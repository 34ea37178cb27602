// trainer_rng.cpp — the trainer's generators: seeding, lending them to torch's
// default generators around a graph call, and their checkpoint states.
#include "train/trainer_rng.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <c10/core/DeviceType.h>

#include "base/error.h"
#include "base/log.h"

namespace gpt {

namespace {

// Held for a whole lease: a default generator stands in for one trainer at a time.
std::mutex &lease_mutex() {
    static std::mutex mutex;
    return mutex;
}

// Generators are handles: these act on the generator `generator` refers to, under its
// own lock (torch's Note [Acquire lock when using random generators]).
at::Tensor state_of(at::Generator generator) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    return generator.get_state();
}

void set_state(at::Generator generator, const at::Tensor &state) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
}

std::string state_key(c10::DeviceType type) { return "rng." + c10::DeviceTypeName(type, /*lower_case=*/true); }

// A checkpoint's state for `generator`; torch's own checks (sizes, a valid mt19937
// position, a Philox offset that is a multiple of 4) become GPT_ERR_ARTIFACT_INVALID.
void set_saved_state(at::Generator generator, const at::Tensor &state, const std::string &key,
                     const std::string &path) {
    if (!state.device().is_cpu() || state.scalar_type() != at::kByte || state.dim() != 1)
        fail(GPT_ERR_ARTIFACT_INVALID, "checkpoint '" + path + "' has '" + key + "' that is not a 1-D uint8 tensor");
    try {
        set_state(std::move(generator), state.contiguous());
    } catch (const c10::Error &e) {
        fail(GPT_ERR_ARTIFACT_INVALID,
             "checkpoint '" + path + "' has an invalid '" + key + "': " + e.what_without_backtrace());
    }
}

}  // namespace

TrainerRng::TrainerRng(c10::Device device, uint64_t seed) : cpu_(at::detail::createCPUGenerator(seed)) {
    if (device.is_cpu()) return;
    gpu_ = at::globalContext().getAcceleratorHooksInterface(device.type()).getNewGenerator(device.index());
    gpu_.set_current_seed(seed);  // Philox: this seed at offset 0, as manual_seed leaves the default one
}

TrainerRng::Lease TrainerRng::lend() { return Lease(*this); }

TrainerRng::Lease::Lease(TrainerRng &rng) : lock_(lease_mutex()) {
    lent_.reserve(2);
    try {
        for (const at::Generator *own : {&rng.cpu_, &rng.gpu_}) {
            if (!own->defined()) continue;
            const at::Generator &standin = at::globalContext().defaultGenerator(own->device());
            at::Tensor saved = state_of(standin);
            set_state(standin, state_of(*own));
            lent_.emplace_back(*own, standin, std::move(saved));
        }
    } catch (...) {
        give_back();
        throw;
    }
}

TrainerRng::Lease::~Lease() { give_back(); }

void TrainerRng::Lease::give_back() noexcept {
    try {
        // What the call drew goes back to the trainer, and each default generator
        // resumes its own stream as if the call had not drawn from it.
        for (auto &[own, standin, saved] : lent_) {
            set_state(own, state_of(standin));
            set_state(standin, saved);
        }
    } catch (const std::exception &e) {
        // Not reachable with torch's generators (their own states always fit them); a
        // destructor must not throw, so say it rather than abort.
        log(GPT_LOG_ERROR, std::string("returning the default random generators failed: ") + e.what());
    } catch (...) {
        log(GPT_LOG_ERROR, "returning the default random generators failed");
    }
    lent_.clear();
}

std::map<std::string, at::Tensor> TrainerRng::states() const {
    std::map<std::string, at::Tensor> states{{state_key(c10::DeviceType::CPU), state_of(cpu_)}};
    if (gpu_.defined()) states.emplace(state_key(gpu_.device().type()), state_of(gpu_));
    return states;
}

TrainerRng TrainerRng::restored(const std::map<std::string, at::Tensor> &tensors, int rank,
                                const std::string &path) const {
    TrainerRng out(cpu_.clone(), gpu_.defined() ? gpu_.clone() : at::Generator());
    const std::string cpu_key = state_key(c10::DeviceType::CPU);
    const auto cpu = tensors.find(cpu_key);
    if (cpu == tensors.end()) fail(GPT_ERR_ARTIFACT_INVALID, "checkpoint '" + path + "' lacks '" + cpu_key + "'");
    set_saved_state(out.cpu_, cpu->second, cpu_key, path);
    bool gpu_from_checkpoint = false;
    if (out.gpu_.defined()) {
        const std::string key = state_key(out.gpu_.device().type());
        const auto gpu = tensors.find(key);
        if (gpu != tensors.end()) {
            set_saved_state(out.gpu_, gpu->second, key, path);
            gpu_from_checkpoint = true;
        } else {
            log(GPT_LOG_WARN, "checkpoint '" + path + "' carries no '" + key +
                                  "' (saved by a CPU trainer, an older runtime or import-ckpt): dropout masks on " +
                                  out.gpu_.device().str() +
                                  " go on from this trainer's seed, not from the saved run's");
        }
    }
    if (rank > 0) out.separate_rank(rank, gpu_from_checkpoint);
    return out;
}

void TrainerRng::separate_rank(int rank, bool gpu_from_checkpoint) {
    // Only rank 0 saves, and every rank loads its states; left as they are, all ranks
    // would draw the same masks from then on. Philox is counter based: rank r was
    // seeded seed + r and its offset advanced as rank 0's did, so its exact state
    // follows. mt19937's cannot be recovered from rank 0's, so the CPU generator gets a
    // seed drawn from rank 0's stream plus r: its own stream, the same on every resume.
    const auto r = static_cast<uint64_t>(rank);
    cpu_.set_current_seed(at::check_generator<at::CPUGeneratorImpl>(cpu_)->random64() + r);
    if (gpu_from_checkpoint) {
        const uint64_t offset = gpu_.get_offset();
        gpu_.set_current_seed(gpu_.current_seed() + r);  // resets the offset
        gpu_.set_offset(offset);
    }
}

}  // namespace gpt
