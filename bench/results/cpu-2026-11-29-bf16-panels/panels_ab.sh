#!/bin/bash
# usage: panels_ab.sh rounds "label:binary:isa" ... ; the bf16 panel linear's medians (build/bench/linear_bench's
# kernel_panels_ms) per variant: rows 1 with weights from memory (--cold), rows 8 from cache
rounds=$1; shift
for r in $(seq $rounds); do for spec in "$@"; do
  IFS=: read label bin isa <<< "$spec"
  GPT_KERNELS_ISA=$isa $bin --rows 1 --reps 21 --cold | python3 -c "
import sys,json
for l in sys.stdin:
  d=json.loads(l); print('$label', 'cold-r1-'+d['shape'], d['kernel_panels_ms'])"
  GPT_KERNELS_ISA=$isa $bin --rows 8 --reps 51 | python3 -c "
import sys,json
for l in sys.stdin:
  d=json.loads(l); print('$label', 'hot-r8-'+d['shape'], d['kernel_panels_ms'])"
done; done | python3 -c "
import sys,collections,statistics
d=collections.defaultdict(list)
for l in sys.stdin:
  b,s,a=l.split(); d[(s,b)].append(float(a))
print('shape variant panels_ms n')
for k in sorted(d): print(k[0], k[1], round(statistics.median(d[k]),4), len(d[k]))"
