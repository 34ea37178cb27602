#!/bin/bash
# usage: ab_isa.sh rounds isa1 isa2 ... ; int4 and q8 medians per shape, rows 1 (cold) and 8 (hot), per path
rounds=$1; shift
B=/work/main/build/bench/linear_bench
for r in $(seq $rounds); do for isa in "$@"; do
  GPT_KERNELS_ISA=$isa $B --rows 1 --reps 21 --cold | python3 -c "
import sys,json
for l in sys.stdin:
  d=json.loads(l); print('$isa', 'cold-r1-'+d['shape'], d['kernel_int4_ms'], d['kernel_int8_q8_ms'])"
  GPT_KERNELS_ISA=$isa $B --rows 8 --reps 51 | python3 -c "
import sys,json
for l in sys.stdin:
  d=json.loads(l); print('$isa', 'hot-r8-'+d['shape'], d['kernel_int4_ms'], d['kernel_int8_q8_ms'])"
done; done | python3 -c "
import sys,collections,statistics
d=collections.defaultdict(list)
for l in sys.stdin:
  b,s,a,q=l.split(); d[(s,b)].append((float(a),float(q)))
print('shape path int4_ms q8_ms n')
for k in sorted(d): print(k[0], k[1], round(statistics.median(x[0] for x in d[k]),4), round(statistics.median(x[1] for x in d[k]),4), len(d[k]))"
