# Included where CMake found the CUDA toolkit. torch's CUDA wheels bring their
# own CUDA libraries and NCCL (site-packages/nvidia/cu<major>, nvidia/nccl), which
# libtorch_cuda loads; torch's CMake config names the toolkit's copies instead.
# Link the wheels' libraries, so that a deployment without the toolkit finds
# them where torch does and no process sees two builds of one library, and take
# nccl.h (c10d's ProcessGroupNCCL.hpp includes it; no toolkit ships it) from the
# NCCL that libtorch_cuda loads. The toolkit's copies are the fallback.
# Sets GPT_NCCL_INCLUDE_DIR; rewrites CUDA::<lib> and TORCH_LIBRARIES in place.

execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import nvidia; print(';'.join(nvidia.__path__))"
  OUTPUT_VARIABLE nvidia_wheels OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(wheel_dirs)
foreach(dir ${nvidia_wheels})
  list(APPEND wheel_dirs ${dir}/cu${CUDAToolkit_VERSION_MAJOR} ${dir}/nccl)
endforeach()

foreach(lib cudart nvrtc cublas cublasLt cufft curand cusolver cusparse nvJitLink cupti)
  find_library(GPT_WHEEL_${lib} NAMES lib${lib}.so.${CUDAToolkit_VERSION_MAJOR} lib${lib}.so.12 lib${lib}.so.11
    lib${lib}.so.10 HINTS ${wheel_dirs} PATH_SUFFIXES lib NO_DEFAULT_PATH)
  if(NOT GPT_WHEEL_${lib})
    continue()
  endif()
  if(TARGET CUDA::${lib})
    set_property(TARGET CUDA::${lib} PROPERTY IMPORTED_LOCATION ${GPT_WHEEL_${lib}})
  endif()
  if(CUDA_${lib}_LIBRARY)  # TorchConfig lists nvrtc by this path
    list(TRANSFORM TORCH_LIBRARIES REPLACE "^${CUDA_${lib}_LIBRARY}$" "${GPT_WHEEL_${lib}}")
  endif()
endforeach()

find_path(GPT_NCCL_INCLUDE_DIR nccl.h HINTS ${wheel_dirs} PATH_SUFFIXES include NO_DEFAULT_PATH)
find_path(GPT_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
if(NOT GPT_NCCL_INCLUDE_DIR)
  message(FATAL_ERROR "nccl.h not found: install torch's CUDA wheel (nvidia-nccl-cu${CUDAToolkit_VERSION_MAJOR}) "
                      "or NCCL's development package, or configure without the CUDA toolkit")
endif()
message(STATUS "CUDA runtime ${GPT_WHEEL_cudart}; nccl.h from ${GPT_NCCL_INCLUDE_DIR}")
