#!/usr/bin/env bash
# Issue 36: the autograd.Function binding bypass (bind_core/autograd.py) before and after, interleaved, two rounds,
# the 20,000-node two-layer GCN audit with two deletion threads. "Before" is a worktree of the commit before it:
#   git worktree add /tmp/wt-before <commit> && bash bench/run_apply36.sh /tmp/wt-before
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
before="${1:?the before worktree}"
out="$root/docs/bench"
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=68719476736
common=(--nodes 20000 --avg-degree 20 --train 1000 --threads 1 --bootstrap 0 --layers 2 --estimator step
  --deletion-threads 2)
for round in 1 2; do
  (cd "$before" && PYTHONPATH=$PWD python bench/bench_scale.py "${common[@]}" \
    --out "$out/apply36_before_gcn2_t2_r$round.json" > "$out/apply36_before_gcn2_t2_r$round.txt")
  (cd "$root" && python bench/bench_scale.py "${common[@]}" \
    --out "$out/apply36_gcn2_t2_r$round.json" > "$out/apply36_gcn2_t2_r$round.txt")
done
