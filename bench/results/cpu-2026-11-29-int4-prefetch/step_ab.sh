#!/bin/bash
# usage: step_ab.sh rounds artifact batch context "label:ENV=V ENV2=V" ... ; decode ms/step medians
rounds=$1; art=$2; batch=$3; ctx=$4; shift 4
for r in $(seq $rounds); do for spec in "$@"; do
  label=${spec%%:*}; envs=${spec#*:}
  env $envs OMP_NUM_THREADS=2 /work/main/build/bench/runtime_bench generate $art --threads 2 --batch $batch --context $ctx --tokens 32 --reps 3 2>/dev/null | python3 -c "
import sys,json,statistics
d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print('$label', statistics.median(d['decode_ms_per_token']))"
done; done | python3 -c "
import sys,collections,statistics
d=collections.defaultdict(list)
for l in sys.stdin:
  b,a=l.split(); d[b].append(float(a))
for k in sorted(d): print(k, round(statistics.median(d[k]),3), [round(x,2) for x in d[k]])"
