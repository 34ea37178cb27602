// isa.h — which vector code path a CPU kernel runs: the widest this CPU and its OS allow, or a lower one named by
// GPT_KERNELS_ISA (scalar, avx2, avx512, avx512_vnni, avx512_bf16), so that one artifact runs at its best on every host
// of its level and a lower path can be forced for tests and comparisons.
#pragma once

#include <optional>
#include <string>

namespace gpt::kernels {

// Each path includes the ones before it. avx2 includes FMA and F16C; avx512 is AVX-512 F + BW (Skylake-SP on);
// avx512_vnni adds VL and VNNI, the integer dot products of the int8 and int4 linears (Ice Lake, Zen 4 on);
// avx512_bf16 adds BF16, the bf16 dot products of the panel linear (Cooper Lake, Sapphire Rapids, Zen 4 on).
enum class Isa { scalar, avx2, avx512, avx512_vnni, avx512_bf16 };

const char *isa_name(Isa isa);
bool cpu_runs(Isa isa);  // CPUID and the OS's saved register state (XCR0) both allow it
// The path every kernel call takes: the widest that cpu_runs, lowered to GPT_KERNELS_ISA where that is set
// (read once). A value that names no path throws std::invalid_argument, one this CPU cannot run
// std::runtime_error, each with the reason.
Isa active_isa();
// Throws std::invalid_argument for a name that is not a path, its message naming `source` (where the name came from).
Isa parse_isa(const std::string &name, const char *source);

// A path in place of active_isa's own choice, process-wide, until cleared (nullopt): the compile of an artifact for
// an ISA level measures its forms on the level's path (the `gpt_kernels::use_path` operator), as Inductor's code
// there is compiled for the level, so that what it picks is the fastest at the level's floor. Throws
// std::runtime_error for a path this CPU cannot run.
void override_isa(std::optional<Isa> isa);

}  // namespace gpt::kernels
