#!/usr/bin/env bash
# README command 1, the main job end to end: set-up → dataset → compile a small
# char-level GPT for CPU → generate text through the C runtime (gpt CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::FutureWarning}"
ART=model_artifacts/bible-char

scripts/setup.sh
scripts/build.sh --target gpt
echo "== dataset"
[ -f data/bible_char/train.bin ] || .venv/bin/python -m gpt_aot prepare-data --out data/bible_char
echo "== compile ($ART/cpu)"
.venv/bin/python -m gpt_aot compile --config char-small --tokenizer data/bible_char/meta.json -o "$ART"
echo "== run through libgpt_runtime"
build/cli/gpt info "$ART/cpu"
build/cli/gpt verify "$ART/cpu"
# The weights are freshly initialised until compiled training lands: expect noise, not scripture.
build/cli/gpt generate "$ART/cpu" --prompt "And God said" -n 200 --seed 1 --temperature 0.8
