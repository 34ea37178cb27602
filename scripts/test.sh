#!/usr/bin/env bash
# README command 2: the whole suite from a fresh clone — set-up, build, lint,
# test artifacts, pytest, Catch2 + C tests via ctest (the install check among
# them), then a short ASan+UBSan fuzz run of the readers (docs/SECURITY.md).
#
# `--full` is the run an issue is resolved on; it adds what the per-submission run leaves
# out to stay within CI's time: the concurrency tests under ThreadSanitizer (a third build
# of the runtime), the install check's library-only build in a fresh tree and gpt-server
# built against the install, the pytest cases marked `full` (tests/conftest.py), 60 s per
# fuzz target instead of 10, and no cache of any kind. The per-submission run keeps what
# repeats once: compiled objects come from ccache (CMakeLists.txt), the test artifacts from
# under GPT_CACHE_DIR (default ~/.cache/gpt-aot; scripts/test_artifacts.sh) and clang-tidy's
# verdict per file from the tracked .clang-tidy-verdicts (scripts/tidy.py), each used only
# while everything it was made from is unchanged; pytest, ctest and the fuzzers run on every core.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --full) export GPT_FULL=1 CCACHE_DISABLE=1 ;;
  "") ;;
  *) echo "usage: $0 [--full]" >&2; exit 2 ;;
esac
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::FutureWarning}"
# Every `cmake --build` below (build, fuzz, install check, ThreadSanitizer) runs one compile per core
# (scripts/build.sh says why).
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
# Each stage's start, with the seconds since the suite began: where CI's time goes.
stage() { echo "== $1 (${SECONDS} s)"; }

stage "setup"
scripts/setup.sh
stage "build"
scripts/build.sh
stage "lint"
scripts/lint.sh
stage "compile test artifacts"
scripts/test_artifacts.sh build/test_artifacts
# A test file to a worker, one worker per core, each with one OpenMP thread (the programs the tests start
# inherit it): two workers of two spinning threads on two cores would each run at a fraction of one.
stage "pytest ($(nproc) workers)"
OMP_NUM_THREADS=1 GPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" .venv/bin/python -m pytest -q --durations=20 \
  -n "$(nproc)" --dist loadfile tests/layout tests/aot tests/text tests/deploy
# One OpenMP thread per test program here too, for the same reason (the runtime's thread tests set their own).
stage "ctest (Catch2, C ABI)"
OMP_NUM_THREADS=1 ctest --test-dir build --output-on-failure -j "$(nproc)"
fuzz_seconds=$([ -n "${GPT_FULL:-}" ] && echo 60 || echo 10)
stage "fuzz (readers of outside bytes, ASan+UBSan, $fuzz_seconds s per target)"
GPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" scripts/fuzz.sh "$fuzz_seconds"
if [ -n "${GPT_FULL:-}" ]; then
  stage "ThreadSanitizer (concurrency tests)"
  GPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" scripts/tsan.sh
fi
stage "done"
if [ -n "${GPT_FULL:-}" ]; then
  echo "full run: no cache used; ThreadSanitizer and the library-only install tree included"
else
  echo "per-submission run: scripts/test.sh --full adds ThreadSanitizer, the library-only install tree and the" \
    "server built on it, the pytest cases marked full, longer fuzzing"
fi
