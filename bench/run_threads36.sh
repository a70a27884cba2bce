#!/usr/bin/env bash
# Issue 36: the 20,000-node two-layer GCN audit with its deletions and Hessian rows on one thread and on two,
# interleaved (two rounds), and the one-layer audit beside them (its default estimate, and the step estimate as
# the two-layer command takes it), on this machine, one torch thread throughout.
#   bash bench/run_threads36.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=68719476736
common=(--nodes 20000 --avg-degree 20 --train 1000 --threads 1 --bootstrap 0)
for round in 1 2; do
  for t in 1 2; do
    python bench/bench_scale.py "${common[@]}" --layers 2 --estimator step --deletion-threads "$t" \
      --out "docs/bench/threads36_gcn2_t${t}_r${round}.json" | tee "docs/bench/threads36_gcn2_t${t}_r${round}.txt"
  done
  python bench/bench_scale.py "${common[@]}" --layers 1 --out "docs/bench/threads36_gcn1_r${round}.json" \
    | tee "docs/bench/threads36_gcn1_r${round}.txt"
  python bench/bench_scale.py "${common[@]}" --layers 1 --estimator step \
    --out "docs/bench/threads36_gcn1_step_r${round}.json" | tee "docs/bench/threads36_gcn1_step_r${round}.txt"
done
