#!/usr/bin/env bash
# Fuzz the readers of outside bytes (fuzz/README.md): build fuzz/ with clang,
# libFuzzer, ASan and UBSan into build-fuzz/ (no torch), replay the regression
# inputs, then fuzz each target for SECONDS, seeded from real artifact files.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET (default 25)] [TARGET...]
# Needs the compiled test artifacts: GPT_TEST_ARTIFACTS or build/test_artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-25}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(manifest safetensors tokenizer checkpoint signature request)
artifacts=${GPT_TEST_ARTIFACTS:-$PWD/build/test_artifacts}
[ -f "$artifacts/tiny-flash/cpu/manifest.json" ] || { echo "fuzz: no test artifacts in $artifacts"; exit 1; }

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja --no-warn-unused-cli -DGPT_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz

# Seeds: the files the project itself writes.
seeds=build-fuzz/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{manifest,safetensors,tokenizer,checkpoint,signature,request}
for a in flash math; do
  cp "$artifacts/tiny-$a/cpu/manifest.json" "$seeds/manifest/$a.json"
  cp "$artifacts/tiny-$a/cpu/golden.safetensors" "$seeds/safetensors/golden-$a.safetensors"
done
# A real manifest with 64 nested arrays under a key the runtime ignores: refused at depth 16 while parsing.
{ printf '{"unknown": %s%s, ' "$(printf '[%.0s' {1..64})" "$(printf ']%.0s' {1..64})"
  tail -c +2 "$artifacts/tiny-flash/cpu/manifest.json"; } >"$seeds/manifest/nested.json"
cp "$artifacts/tiny-flash/cpu/weights.safetensors" "$artifacts/reference.safetensors" "$seeds/safetensors/"
cp "$artifacts/imported_ckpt.safetensors" "$seeds/checkpoint/"
# The same checkpoint's header and metadata with one value per tensor: 6 KB instead of 380, so runs may cap
# the input's length (-max_len) and still start from a checkpoint every check accepts.
python3 - "$artifacts/imported_ckpt.safetensors" "$seeds/checkpoint/one-value-tensors.safetensors" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
header = json.loads(data[8 : 8 + struct.unpack("<Q", data[:8])[0]])
end = 0
for name, tensor in header.items():
    if name != "__metadata__":  # each tensor keeps its dtype and rank, with every dimension 1
        size = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "BF16": 2, "F16": 2}.get(tensor["dtype"], 1)
        tensor.update(shape=[1] * len(tensor["shape"]), data_offsets=[end, end + size])
        end += size
text = json.dumps(header).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + bytes(end))
PY
# fuzz_tokenizer's first byte picks the mode (fuzz/fuzz_tokenizer.cpp): 0 char reader, 3 BPE reader, 1 fixed
# BPE encoder, 5 fuzzed vocabulary with special tokens allowed.
{ printf '\0'; cat "$artifacts/tiny-flash/cpu/tokenizer.json"; printf '\0Hello, world!\n'; } >"$seeds/tokenizer/hello"
{ printf '\0'; cat "$artifacts/tiny-flash/cpu/tokenizer.json"; printf '\0caf\xc3\xa9 \xff'; } >"$seeds/tokenizer/outside"
{ printf '\3'; cat "$artifacts/tiny-bpe/cpu/tokenizer.json"; printf '\0In the beginning <|endoftext|> caf\xc3\xa9'; } \
  >"$seeds/tokenizer/bpe"
printf '\1The cat'"'"'s   toy, don'"'"'t \xe2\x80\x99 \xf0\x9f\x98\x80\n\n the end' >"$seeds/tokenizer/encode"
printf '\5ab\1abc\1 a\1bc\1\xc3\xa9\0abc abcabc <|s|> \xc3\xa9' >"$seeds/tokenizer/vocab"
printf '{"prompt": "And God said", "max_tokens": 64, "temperature": 0.8, "top_k": 40, "top_p": 0.95, "seed": 1, "stream": true}' \
  >"$seeds/request/full.json"
printf '{"prompt": "a"}' >"$seeds/request/minimal.json"
printf '%s' '{"model": "tiny", "prompt": [1, 2, 3], "max_tokens": 16, "stop": ["\n", "ab"], "stream": true, "stream_options": {"include_usage": true}, "logprobs": 5, "echo": false, "n": 1, "seed": -3, "ignore_eos": true, "user": "u"}' \
  >"$seeds/request/completion.json"
printf '%s' '{"prompt": ["one prompt"], "logit_bias": {}, "presence_penalty": 0, "suffix": null, "return_tokens_as_token_ids": true}' \
  >"$seeds/request/completion-neutral.json"
printf '%s' '{"tokens": [0, 1, 2147483647]}' >"$seeds/request/detokenize.json"
printf '%s' '{"prompt": "caf\u00e9 \ud83d\ude00", "max_tokens": 1024, "temperature": 0}' >"$seeds/request/unicode.json"
signed=$(mktemp -d)
trap 'rm -rf "$signed"' EXIT
cp "$artifacts/tiny-flash/cpu/tokenizer.json" "$signed/"
printf '{"files": {"tokenizer.json": {"sha256": "%s", "size": %d}}}' \
  "$(sha256sum "$signed/tokenizer.json" | cut -d' ' -f1)" "$(stat -c %s "$signed/tokenizer.json")" >"$signed/manifest.json"
PYTHONPATH="$PWD/aot" .venv/bin/python -m gpt_aot keygen -o "$signed/key" >/dev/null
PYTHONPATH="$PWD/aot" .venv/bin/python -m gpt_aot sign "$signed" --key "$signed/key.key" >/dev/null
cp "$signed/manifest.sig" "$signed/key.pub" "$seeds/signature/"
# fuzz_signature's modes 1 (edit the signed manifest) and 2 (edit its signature), over a real manifest.
{ printf '\1\0\0\0\0'; cat "$artifacts/tiny-flash/cpu/manifest.json"; } >"$seeds/signature/edit-manifest"
{ printf '\2\0\0\0'; cat "$artifacts/tiny-flash/cpu/manifest.json"; } >"$seeds/signature/edit-signature"

# One target: its regression inputs, then SECONDS of fuzzing. Writes its summary line to build-fuzz/result_<t>;
# a failure also prints the log's tail and leaves the line saying FAILED.
fuzz_target() {
  local t=$1 bin=build-fuzz/fuzz/fuzz_$1 result=ok
  # Every input that once crashed a reader stays in fuzz/regressions and must pass.
  local regressions=(fuzz/regressions/"$t"/*)
  if [ -e "${regressions[0]}" ]; then
    "$bin" "${regressions[@]}" >"build-fuzz/regressions_$t.log" 2>&1 ||
      { echo "fuzz: a $t regression input fails again"; tail -40 "build-fuzz/regressions_$t.log"; result=FAILED; }
  fi
  local corpus=build-fuzz/corpus/$t crashes=build-fuzz/crashes/$t log=build-fuzz/fuzz_$t.log
  mkdir -p "$corpus" "$crashes"
  if ! "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$corpus" "$seeds/$t" >"$log" 2>&1; then
    result="FAILED (input in $crashes; log $log)"
    tail -40 "$log"
  fi
  local execs
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  echo "fuzz_$t: ${execs:-?} execs in ${seconds}s, corpus $(ls "$corpus" | wc -l) inputs: $result" >"build-fuzz/result_$t"
}

# A fuzzer keeps one core busy: as many targets at once as there are cores.
rm -f build-fuzz/result_*
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= $(nproc))); do wait -n; done
  fuzz_target "$t" &
done
wait
status=0
for t in "${targets[@]}"; do
  cat "build-fuzz/result_$t"
  grep -q ': ok$' "build-fuzz/result_$t" || status=1
done
exit $status
