#!/usr/bin/env bash
# Configure and build libgpt_runtime, the gpt CLI and the tests into build/.
# Arguments go to the build step, e.g. `scripts/build.sh --target gpt`.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja --no-warn-unused-cli -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DPython3_EXECUTABLE="$PWD/.venv/bin/python" -DGPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" >/dev/null
cmake --build build "$@"
