// threads.h — whether the kernels' parallel loops run on torch's intra-op threads.
#pragma once

namespace gpt::kernels {

// at::parallel_for is a header template over `#pragma omp parallel`: a library compiled without OpenMP runs
// every range on the calling thread alone, silently (how this library's linear and decode attention ran on one
// core of two until 2026-11-28). Both builds of the library (CMake's and the compile's extension) check it.
bool threaded();

}  // namespace gpt::kernels
