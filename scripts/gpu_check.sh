#!/usr/bin/env bash
# On a GPU machine that reaches no package registry, from a copy of the working
# tree with .carry/ (scripts/gpu_carry.sh) beside it: build the runtime against
# the torch found there, compile the test artifacts, run the whole suite with
# its GPU tests, measure the attention pick for GPT-2 124M on this GPU, and
# write logs and a summary under $OUT (./gpu-results when unset).
# Lint, fuzzing and TSan stay with the CPU suite (scripts/test.sh).
# Arguments name the steps to run (default: the whole suite, in this order), so a
# machine that limits one command's time can take them in several calls over one build:
#   build fixtures pytest ctest pick     the whole suite, the GPT-2 attention pick
#   fixtures-cuda pytest-cuda ctest-cuda the GPU's fixtures and tests alone (the CPU
#                                        suite's run on CI), for a short lease
#   decode train                         GPT-2 124M bf16 decode rows, seed-config training rows
#                                        (bench/suite.py): their artifacts compile beside the rest
# With build and a fixtures step, the build runs beside the fixtures (they need none).
# GPT_GPU_DEADLINE=S: no step starts after S seconds, and the pick and benchmark steps
# stop at S, so a leased machine's time limit still leaves the summary and logs.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-results}
CARRY=$ROOT/.carry
PY=${GPT_PYTHON:-$(command -v python3)}  # the machine's own, which holds torch
mkdir -p "$OUT"
if [ ! -d "$CARRY/root" ]; then
  echo "gpu_check: $CARRY is missing: run scripts/gpu_carry.sh on a CPU machine and carry .carry" >&2
  exit 2
fi

# The carried Debian packages on every search path the build and tests use.
SYSROOT=$CARRY/root
LIBDIR=$SYSROOT/usr/lib/x86_64-linux-gnu
export CMAKE_PREFIX_PATH=$SYSROOT/usr
export CPLUS_INCLUDE_PATH=$SYSROOT/usr/include${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}
export LIBRARY_PATH=$LIBDIR${LIBRARY_PATH:+:$LIBRARY_PATH}
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig:$SYSROOT/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
# Fallback libraries only where the machine lacks its own copy.
mkdir -p "$CARRY/missing" "$CARRY/bin"
known=$(ldconfig -p)
for lib in "$CARRY"/fallback/usr/lib/x86_64-linux-gnu/*.so.[0-9]; do
  grep -q " $(basename "$lib") " <<<"$known" || ln -sf "$lib" "$CARRY/missing/"
done
export LD_LIBRARY_PATH=$LIBDIR:$CARRY/missing${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
printf '#!/bin/sh\nexec "%s" "$@"\n' "$SYSROOT/usr/bin/pkgconf" >"$CARRY/bin/pkg-config"
printf '#!/bin/sh\nexec "%s" -p "%s" "$@"\n' "$SYSROOT/usr/bin/bible" "$SYSROOT/usr/lib" >"$CARRY/bin/bible"
chmod +x "$CARRY/bin/pkg-config" "$CARRY/bin/bible"
export PATH=$CARRY/bin:$PATH

# The carried wheels (gpu_carry.sh) of packages the machine's python3 lacks, into a folder of their
# own: the packages it has stay its own versions.
SITE=$CARRY/site
if [ -d "$CARRY/wheels" ]; then
  mapfile -t missing_wheels < <("$PY" -c '
import importlib.metadata as md, pathlib, sys
for wheel in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    try:
        md.version(wheel.name.split("-")[0])
    except md.PackageNotFoundError:
        print(wheel)' "$CARRY/wheels")
  ((${#missing_wheels[@]} == 0)) ||
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "${missing_wheels[@]}"
fi
# The project's scripts use .venv/bin/python: here it is the machine's python3 with aot/ and the
# carried packages on its path.
mkdir -p .venv/bin
printf '#!/bin/sh\nPYTHONPATH="%s${PYTHONPATH:+:$PYTHONPATH}:%s" exec "%s" "$@"\n' "$ROOT/aot" "$SITE" "$PY" >.venv/bin/python
chmod +x .venv/bin/python
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::FutureWarning}" PYTHONUNBUFFERED=1
ARTIFACTS=$ROOT/build/test_artifacts

STEPS=" ${*:-build fixtures pytest ctest pick} "
DEADLINE=${GPT_GPU_DEADLINE:-0}
failed=()
asked() { [[ $STEPS == *" $1 "* ]]; }
left() { echo $((DEADLINE - SECONDS)); }  # seconds to the deadline
step() {  # step NAME LOG COMMAND...: runs COMMAND if NAME was asked for, appends to LOG, records a failure
  local name=$1 log=$2
  shift 2
  asked "$name" || return 0
  if ((DEADLINE && $(left) <= 0)); then
    echo "== $name: not reached (deadline)" | tee -a "$log"
    failed+=("$name:not-reached")
    return 0
  fi
  echo "== $name" | tee -a "$log"
  local t0=$SECONDS
  "$@" >>"$log" 2>&1 || failed+=("$name")
  echo "   $name: $((SECONDS - t0)) s" | tee -a "$log"
}
until_deadline() {  # until_deadline COMMAND...: COMMAND, stopped at the deadline if one is set
  if ((DEADLINE)); then timeout --kill-after=10 "$(left)" "$@"; else "$@"; fi
}

{
  nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader || echo "no nvidia-smi"
  .venv/bin/python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', \
torch.backends.cudnn.version(), 'gpu', torch.cuda.get_device_name() if torch.cuda.is_available() else None)"
  nvcc --version | tail -1
  g++ --version | head -1
  cmake --version | head -1
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

# The benchmark rows' artifacts compile from the start, side by side and beside the build and the
# tests (mostly CPU work); the rows run last, on a quiet GPU. GPT_GPU_TRAIN_KERNELS: the training
# rows' attention kernels (each is one compile of the seed model with training graphs).
read -r -a TRAIN_KERNELS <<<"${GPT_GPU_TRAIN_KERNELS:-cudnn flash}"
BENCH=(.venv/bin/python bench/suite.py --models gpt2-124M --attention "${TRAIN_KERNELS[@]}")
ONLY=()
if asked decode && ! asked train; then ONLY=(--only infer); fi
if asked train && ! asked decode; then ONLY=(--only train); fi
seed_data() { [ -f data/bible_char/train.bin ] || .venv/bin/python -m gpt_aot prepare-data --out data/bible_char; }
if asked decode || asked train; then
  (echo "== bench: compile" && seed_data && until_deadline "${BENCH[@]}" "${ONLY[@]}" --compile-only) \
    >>"$OUT/bench.log" 2>&1 &
  bench_compile_job=$!
fi

# A newer compiler than CI's may warn where CI's does not: warnings stay visible, not fatal.
# CMAKE_POLICY_VERSION_MINIMUM: a CMake 4 still reads the carried packages' older config files.
build() { env GPT_CMAKE_ARGS="-DGPT_WERROR=OFF" CMAKE_POLICY_VERSION_MINIMUM=3.5 scripts/build.sh -j "$(nproc)"; }
if asked build && { asked fixtures || asked fixtures-cuda; }; then
  # Beside the fixtures, in its own log; its status is the background job's.
  (step build "$OUT/build.log" build; ((${#failed[@]} == 0))) &
  build_job=$!
  STEPS=${STEPS/ build / }
fi
step fixtures "$OUT/fixtures.log" bash -c "rm -rf '$ARTIFACTS' && .venv/bin/python tests/fixtures/build_artifacts.py '$ARTIFACTS'"
step fixtures-cuda "$OUT/fixtures.log" bash -c "rm -rf '$ARTIFACTS' && .venv/bin/python tests/fixtures/build_artifacts.py '$ARTIFACTS' --cuda-only"
if [ -n "${build_job:-}" ]; then
  wait "$build_job" || failed+=("build")
else
  step build "$OUT/build.log" build
fi
step pytest "$OUT/pytest.log" env GPT_TEST_ARTIFACTS="$ARTIFACTS" .venv/bin/python -m pytest -q -rs \
  --junitxml="$OUT/pytest.xml" tests/aot tests/deploy
# The out-of-memory case takes every byte of the GPU: it runs alone, after all other GPU work
# (beside it, any CUDA case or compile would fail for want of memory), at the end.
HOG="out of GPU memory is GPT_ERR_OUT_OF_MEMORY"
step ctest "$OUT/ctest.log" ctest --test-dir build --output-on-failure -j 8 -E "$HOG" --output-junit "$OUT/ctest.xml"
# The GPU's cases alone: the Catch2 cases tagged [cuda] (and the host and target checks of CUDA
# artifacts), then the GPU's pytest cases (-v: each outcome is in the log even when the deadline
# stops the run before the JUnit file).
step ctest-cuda "$OUT/ctest.log" ctest --test-dir build --output-on-failure -j 4 -R "CUDA|GPU" -E "$HOG" \
  --output-junit "$OUT/ctest.xml"
# With pytest-xdist (the GPU image has it), one worker per artifact group compiles them side by side.
XDIST=()
.venv/bin/python -c "import xdist" 2>/dev/null && XDIST=(-n 4 --dist loadgroup)
step pytest-cuda "$OUT/pytest.log" until_deadline env GPT_TEST_ARTIFACTS="$ARTIFACTS" .venv/bin/python -m pytest -v \
  -rs "${XDIST[@]}" --junitxml="$OUT/pytest.xml" tests/aot/test_cuda.py
# The attention pick: every kernel timed on GPT-2 124M's shapes, bf16, for inference and for
# training (forward + backward), recorded in the manifest.
PICK=$ROOT/build/gpu_check/gpt2
step pick "$OUT/pick.log" until_deadline .venv/bin/python -m gpt_aot compile --config gpt2 --target cuda --arch auto \
  --dtype bf16 --attention auto --train -o "$PICK"
cp "$PICK"/sm_*/manifest.json "$OUT/gpt2-manifest.json" 2>/dev/null
# Decode rows for GPT-2 124M bf16 (eager, torch.compile and the runtime on one artifact whose
# attention the compile measured), then training rows on the seed config for TRAIN_KERNELS
# (bench/suite.py; bench/results/ has the CPU tables).
if [ -n "${bench_compile_job:-}" ] && ! wait "$bench_compile_job"; then
  failed+=("bench-compile")
else
  step decode "$OUT/bench.log" until_deadline "${BENCH[@]}" --only infer --out "$OUT/decode"
  step train "$OUT/bench.log" until_deadline "${BENCH[@]}" --only train --out "$OUT/train"
fi
[ -f "$OUT/gpt2-manifest.json" ] || cp bench/work/cuda/gpt2-124M-infer-bf16/sm_*/manifest.json "$OUT/gpt2-manifest.json" 2>/dev/null
for suite in ctest ctest-cuda; do
  step "$suite" "$OUT/ctest.log" ctest --test-dir build --output-on-failure -R "$HOG" --output-junit "$OUT/ctest-oom.xml"
done

.venv/bin/python scripts/gpu_summary.py "$OUT" "${failed[@]}"
((${#failed[@]} == 0))
