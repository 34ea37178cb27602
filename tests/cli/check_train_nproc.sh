#!/usr/bin/env bash
# `gpt train --nproc 2 --batch 2` trains like `gpt train --batch 4` (the same
# per-step losses to the printed precision), writes one checkpoint from rank 0,
# and that checkpoint resumes in a 1-rank run. Usage: check_train_nproc.sh GPT ARTIFACT CORPUS_DIR
set -euo pipefail
gpt=$1 artifact=$2 data=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--data "$data" --block 32 --eval-every 1000 --eval-iters 1 --warmup 5 --threads 1 --dist-timeout 60)

timeout 120 "$gpt" train "$artifact" "${common[@]}" --iters 30 --batch 4 >"$work/one.log"
timeout 120 "$gpt" train "$artifact" "${common[@]}" --iters 30 --batch 2 --nproc 2 --ckpt "$work/ckpt" >"$work/two.log"
losses() { grep -o 'iter [0-9]*/30 .* loss [0-9.]*' "$1" | sed 's/\[.*\]//'; }
[ -n "$(losses "$work/one.log")" ] || { echo "no progress lines"; cat "$work/one.log"; exit 1; }
if ! diff <(losses "$work/one.log") <(losses "$work/two.log"); then
  echo "2 ranks x batch 2 differ from 1 rank x batch 4"; exit 1
fi
grep -q "2 rank(s)" "$work/two.log" || { echo "rank 0 did not report the world size"; exit 1; }
[ "$(grep -c '^training ' "$work/two.log")" = 1 ] || { echo "more than one rank printed"; exit 1; }
[ -f "$work/ckpt" ] || { echo "no checkpoint from rank 0"; exit 1; }

timeout 120 "$gpt" train "$artifact" "${common[@]}" --iters 32 --batch 4 --ckpt "$work/ckpt" --resume >"$work/resumed.log"
grep -q "resumed from $work/ckpt at iteration 30" "$work/resumed.log" || { cat "$work/resumed.log"; exit 1; }
echo "ok: --nproc 2 matches the 1-rank run; its checkpoint resumes on 1 rank"
