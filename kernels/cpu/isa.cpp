// isa.cpp — the CPU's vector paths (CPUID and XCR0 through the compiler's builtins) and the GPT_KERNELS_ISA switch.
#include "cpu/isa.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace gpt::kernels {

const char *isa_name(Isa isa) {
    switch (isa) {
        case Isa::scalar: return "scalar";
        case Isa::avx2: return "avx2";
        case Isa::avx512: return "avx512";
        case Isa::avx512_vnni: return "avx512_vnni";
        case Isa::avx512_bf16: return "avx512_bf16";
    }
    return "unknown";
}

Isa parse_isa(const std::string &name, const char *source) {
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_vnni, Isa::avx512_bf16})
        if (name == isa_name(isa)) return isa;
    throw std::invalid_argument(std::string(source) + "=" + name +
                                " names no path: use scalar, avx2, avx512, avx512_vnni or avx512_bf16");
}

bool cpu_runs(Isa isa) {
#if defined(__x86_64__)
    // libgcc's checks include the OS's XCR0 state: a CPU whose OS does not save AVX-512 registers reports none.
    switch (isa) {
        case Isa::scalar: return true;
        case Isa::avx2:
            // F16C comes with every CPU that has AVX2 and FMA (clang's builtin cannot ask for it by name).
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        case Isa::avx512:  // its code also uses AVX2, FMA and F16C instructions
            return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        case Isa::avx512_vnni:  // VNNI's dot products on 256-bit registers need VL
            return cpu_runs(Isa::avx512) && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
        case Isa::avx512_bf16: return cpu_runs(Isa::avx512_vnni) && __builtin_cpu_supports("avx512bf16");
    }
    return false;
#else
    return isa == Isa::scalar;
#endif
}

namespace {

Isa choose() {
    Isa widest = Isa::scalar;
    for (Isa isa : {Isa::avx2, Isa::avx512, Isa::avx512_vnni, Isa::avx512_bf16})
        if (cpu_runs(isa)) widest = isa;
    const char *forced = std::getenv("GPT_KERNELS_ISA");
    if (forced == nullptr || *forced == '\0') return widest;
    const Isa isa = parse_isa(forced, "GPT_KERNELS_ISA");
    if (!cpu_runs(isa))
        throw std::runtime_error(std::string("GPT_KERNELS_ISA=") + forced + ": this CPU cannot run that path (its " +
                                 "widest is " + isa_name(widest) + ")");
    return isa;
}

// override_isa's path as its enumerator's value, or NO_OVERRIDE.
constexpr int NO_OVERRIDE = -1;
std::atomic<int> overridden{NO_OVERRIDE};

}  // namespace

Isa active_isa() {
    static const Isa chosen = choose();
    const int isa = overridden.load(std::memory_order_relaxed);
    return isa == NO_OVERRIDE ? chosen : static_cast<Isa>(isa);
}

void override_isa(std::optional<Isa> isa) {
    if (isa && !cpu_runs(*isa))
        throw std::runtime_error(std::string("this CPU cannot run the kernels' ") + isa_name(*isa) + " path");
    overridden.store(isa ? static_cast<int>(*isa) : NO_OVERRIDE, std::memory_order_relaxed);
}

}  // namespace gpt::kernels
