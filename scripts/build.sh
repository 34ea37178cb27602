#!/usr/bin/env bash
# Configure and build libgpt_runtime, the gpt CLI and the tests into build/.
# Arguments go to the build step, e.g. `scripts/build.sh --target gpt`;
# GPT_CMAKE_ARGS adds configure options, e.g. GPT_CMAKE_ARGS="-DGPT_WERROR=OFF".
set -euo pipefail
cd "$(dirname "$0")/.."
# One compile per core: with ninja's default, two more than the cores, a cold build on 2 cores took 441 s and
# 765 s of CPU instead of 343 s and 597 s (bench/results/cpu-2026-11-27-suite-time-2).
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
cmake -S . -B build -G Ninja --no-warn-unused-cli -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DPython3_EXECUTABLE="$PWD/.venv/bin/python" -DGPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" ${GPT_CMAKE_ARGS:-} >/dev/null
cmake --build build "$@"
