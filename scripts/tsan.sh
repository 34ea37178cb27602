#!/usr/bin/env bash
# ThreadSanitizer over the concurrency tests (docs/SECURITY.md): the project's
# own code instrumented in build-tsan/, libtorch and the compiled graphs as they
# ship. Any report fails the run. Needs the compiled test artifacts:
# GPT_TEST_ARTIFACTS or build/test_artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."
artifacts=${GPT_TEST_ARTIFACTS:-$PWD/build/test_artifacts}
[ -f "$artifacts/tiny-flash/cpu/manifest.json" ] || { echo "tsan: no test artifacts in $artifacts"; exit 1; }

cmake -S . -B build-tsan -G Ninja --no-warn-unused-cli -DGPT_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPython3_EXECUTABLE="$PWD/.venv/bin/python" -DGPT_TEST_ARTIFACTS="$artifacts" >/dev/null
cmake --build build-tsan --target concurrency_tests
# One intra-op thread: libgomp's barriers are invisible to TSan and would be
# reported as races inside torch's kernels; the threads under test are ours.
OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1" \
  GPT_TEST_ARTIFACTS="$artifacts" build-tsan/tests/concurrency_tests
