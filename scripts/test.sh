#!/usr/bin/env bash
# README command 2: the whole suite from a fresh clone — set-up, build, lint,
# test artifacts (compiled once per run), pytest, Catch2 + C tests via ctest,
# then a short ASan+UBSan fuzz run of the readers and the concurrency tests
# under ThreadSanitizer (docs/SECURITY.md).
set -euo pipefail
cd "$(dirname "$0")/.."
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
rm -rf build/test_artifacts
.venv/bin/python tests/fixtures/build_artifacts.py build/test_artifacts
stage "pytest"
GPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" .venv/bin/python -m pytest -q tests/layout tests/aot tests/text tests/deploy
stage "ctest (Catch2, C ABI)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
stage "fuzz (readers of outside bytes, ASan+UBSan, 25 s per target)"
GPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" scripts/fuzz.sh 25
stage "ThreadSanitizer (concurrency tests)"
GPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" scripts/tsan.sh
stage "done"
