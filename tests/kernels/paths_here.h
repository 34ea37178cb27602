// paths_here.h — the kernels' vector paths this CPU runs, each kernel test's loop; the others are named in a warning.
#pragma once

#include <catch2/catch.hpp>

#include <vector>

#include "cpu/isa.h"

inline std::vector<gpt::kernels::Isa> paths_here() {
    using gpt::kernels::Isa;
    std::vector<Isa> paths;
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_vnni, Isa::avx512_bf16}) {
        if (gpt::kernels::cpu_runs(isa))
            paths.push_back(isa);
        else
            WARN("this CPU cannot run the " << gpt::kernels::isa_name(isa) << " path: not tested here");
    }
    return paths;
}
