#!/bin/bash
# usage: ab.sh rounds bin1 bin2 ... ; prints int4 per shape per binary, medians
rounds=$1; shift
for r in $(seq $rounds); do for b in "$@"; do
  $b --rows 1 --reps 201 | python3 -c "
import sys,json
for l in sys.stdin:
  d=json.loads(l); print('$(basename $b)', d['shape'], d['kernel_int4_ms'])"
  $b --rows 1 --reps 21 --cold | python3 -c "
import sys,json
for l in sys.stdin:
  d=json.loads(l); print('$(basename $b)', 'cold-'+d['shape'], d['kernel_int4_ms'])"
done; done | python3 -c "
import sys,collections,statistics
d=collections.defaultdict(list)
for l in sys.stdin:
  b,s,v=l.split(); d[(s,b)].append(float(v))
for k in sorted(d): print(k[0], k[1], round(statistics.median(d[k]),4), len(d[k]))"
