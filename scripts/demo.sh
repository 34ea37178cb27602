#!/usr/bin/env bash
# README command 1, the main job end to end: set-up → dataset → compile a small
# char-level GPT for CPU (inference and training graphs) → train it through the
# C runtime for a few minutes → generate text from the trained weights.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore::FutureWarning}"
ART=model_artifacts/bible-char
ITERS="${DEMO_ITERS:-1500}"

scripts/setup.sh
scripts/build.sh --target gpt
echo "== dataset"
[ -f data/bible_char/train.bin ] || .venv/bin/python -m gpt_aot prepare-data --out data/bible_char
echo "== compile ($ART/cpu)"
.venv/bin/python -m gpt_aot compile --config char-small --tokenizer data/bible_char/meta.json --train -o "$ART"
echo "== run through libgpt_runtime"
build/cli/gpt info "$ART/cpu"
build/cli/gpt verify "$ART/cpu"
echo "== train ($ITERS steps), then generate from the trained weights"
build/cli/gpt train "$ART/cpu" --data data/bible_char --iters "$ITERS" --batch 16 --lr 2e-3 --min-lr 2e-4 \
  --warmup 50 --eval-every 250 --sample-prompt "And God said" --sample-tokens 400
