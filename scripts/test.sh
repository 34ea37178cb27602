#!/usr/bin/env bash
# README command 2: the whole suite from a fresh clone — set-up, build, lint,
# test artifacts, pytest, Catch2 + C tests via ctest,
# then a short ASan+UBSan fuzz run of the readers and the concurrency tests
# under ThreadSanitizer (docs/SECURITY.md).
#
# What repeats is done once: compiled objects come from ccache (CMakeLists.txt; the install check's library
# tree and later runs on this machine hit it), and under GPT_CACHE_DIR (default ~/.cache/gpt-aot) the test
# artifacts (scripts/test_artifacts.sh) and clang-tidy's verdict per file (scripts/lint.sh) are kept, each used
# only while everything it was made from is unchanged. `--full` uses none of
# them: run it before an issue is called resolved.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --full) export GPT_FULL=1 CCACHE_DISABLE=1 ;;
  "") ;;
  *) echo "usage: $0 [--full]" >&2; exit 2 ;;
esac
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::FutureWarning}"
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
stage "pytest"
GPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" .venv/bin/python -m pytest -q tests/layout tests/aot tests/text tests/deploy
stage "ctest (Catch2, C ABI)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
stage "fuzz (readers of outside bytes, ASan+UBSan, 25 s per target)"
GPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" scripts/fuzz.sh 25
stage "ThreadSanitizer (concurrency tests)"
GPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" scripts/tsan.sh
stage "done"
[ -z "${GPT_FULL:-}" ] || echo "full run: no cache used"
