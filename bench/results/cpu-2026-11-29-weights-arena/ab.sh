#!/bin/bash
# usage: bin_art_ab.sh rounds batch context "label:runtime_bench:artifact_dir" ... ; decode ms/step medians
rounds=$1; batch=$2; ctx=$3; shift 3
for r in $(seq $rounds); do for spec in "$@"; do
  IFS=: read label bin art <<< "$spec"
  OMP_NUM_THREADS=2 $bin generate $art --threads 2 --batch $batch --context $ctx --tokens 32 --reps 3 2>/dev/null | python3 -c "
import sys,json,statistics
d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print('$label', statistics.median(d['decode_ms_per_token']))"
done; done | python3 -c "
import sys,collections,statistics
d=collections.defaultdict(list)
for l in sys.stdin:
  b,a=l.split(); d[b].append(float(a))
labels=list(d)
for k in labels: print(k, round(statistics.median(d[k]),3), [round(x,2) for x in d[k]])
if len(labels)==2:
  a,b=labels; print(f'{b} faster than {a} in', sum(y<x for x,y in zip(d[a],d[b])), 'of', len(d[a]), 'paired rounds')"
