// threads.cpp — see threads.h. Compiled with the same flags as the kernels that call at::parallel_for.
#include "cpu/threads.h"

namespace gpt::kernels {

bool threaded() {
#ifdef _OPENMP
    return true;
#else
    return false;
#endif
}

}  // namespace gpt::kernels
