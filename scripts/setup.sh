#!/usr/bin/env bash
# One-time set-up on a fresh Debian machine: system packages (apt-get) and a
# project-local Python environment (.venv) with the pinned torch. Idempotent:
# a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

# The GPU machines run torch 2.11 (CUDA 13); artifacts are only portable within
# one torch minor version, so the compiler side is pinned to the same release.
TORCH_VERSION="${GPT_TORCH_VERSION:-2.11.0}"
# What the build needs (deploy/build-packages.txt, shared with the Docker image), then what the tests and lint
# need, then bench/http_transport.py's load client and its libmicrohttpd prototype.
mapfile -t APT_PACKAGES < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e 's/[[:space:]]//g' deploy/build-packages.txt)
APT_PACKAGES+=(catch2 bible-kjv clang-format clang-tidy clang libclang-rt-dev ccache)
APT_PACKAGES+=(wrk libmicrohttpd-dev)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
installed=$(.venv/bin/python -c "import torch; print(torch.__version__.split('+')[0])" 2>/dev/null || true)
if [ "$installed" != "$TORCH_VERSION" ] || ! .venv/bin/python -c "import gpt_aot, safetensors, pytest, xdist, prometheus_client, openai, tiktoken, tokenizers, transformers, regex" 2>/dev/null; then
  echo "setup: installing torch $TORCH_VERSION and Python dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "torch==$TORCH_VERSION" -r requirements.txt
  .venv/bin/python -m pip install -q --no-deps -e aot
fi
echo "setup: ok (torch $(.venv/bin/python -c 'import torch; print(torch.__version__)'))"
