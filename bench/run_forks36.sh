#!/usr/bin/env bash
# Issue 36: the 20,000-node two-layer GCN audit with its deletions on one thread, on two threads, and in two forked
# processes (bind_core.forks), interleaved (two rounds), and the one-layer audit beside them, on this machine, one
# torch thread throughout.
#   bash bench/run_forks36.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=68719476736
common=(--nodes 20000 --avg-degree 20 --train 1000 --threads 1 --bootstrap 0)
two=("${common[@]}" --layers 2 --estimator step)
for round in 1 2; do
  python bench/bench_scale.py "${two[@]}" --deletion-threads 1 --out "docs/bench/forks36_gcn2_one_r${round}.json" \
    | tee "docs/bench/forks36_gcn2_one_r${round}.txt"
  python bench/bench_scale.py "${two[@]}" --deletion-threads 2 --no-forks \
    --out "docs/bench/forks36_gcn2_threads_r${round}.json" | tee "docs/bench/forks36_gcn2_threads_r${round}.txt"
  python bench/bench_scale.py "${two[@]}" --deletion-threads 2 --out "docs/bench/forks36_gcn2_forks_r${round}.json" \
    | tee "docs/bench/forks36_gcn2_forks_r${round}.txt"
  python bench/bench_scale.py "${common[@]}" --layers 1 --out "docs/bench/forks36_gcn1_r${round}.json" \
    | tee "docs/bench/forks36_gcn1_r${round}.txt"
done
