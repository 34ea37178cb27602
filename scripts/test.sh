#!/usr/bin/env bash
# README command 2: the whole suite from a fresh clone — set-up, build, lint,
# test artifacts (compiled once per run), pytest, Catch2 + C tests via ctest,
# then a short ASan+UBSan fuzz run of the readers and the concurrency tests
# under ThreadSanitizer (docs/SECURITY.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::FutureWarning}"

scripts/setup.sh
echo "== build"
scripts/build.sh
echo "== lint"
scripts/lint.sh
echo "== compile test artifacts"
rm -rf build/test_artifacts
.venv/bin/python tests/fixtures/build_artifacts.py build/test_artifacts
echo "== pytest"
GPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" .venv/bin/python -m pytest -q tests/layout tests/aot tests/deploy
echo "== ctest (Catch2, C ABI)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
echo "== fuzz (readers of outside bytes, ASan+UBSan, 25 s per target)"
GPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" scripts/fuzz.sh 25
echo "== ThreadSanitizer (concurrency tests)"
GPT_TEST_ARTIFACTS="$PWD/build/test_artifacts" scripts/tsan.sh
