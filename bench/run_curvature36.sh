#!/usr/bin/env bash
# Issue 36: the step estimate's curvature from the Jacobian (bind_core.influence.gaussnewton), before (a worktree, e.g.
# of 97eb74d) and after (this checkout): the 20,000-node two-layer GCN audit interleaved over two rounds with the
# one-layer audit beside it, then the Income ratio (bench/income_ratio.py) after and before; raw JSON in
# docs/bench/curvature36_*.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
before="${1:?the before worktree, e.g. git worktree add /tmp/wt-before 97eb74d}"
data="${2:-$root/../shared/datasets}"
out=$root/docs/bench
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=68719476736
args="--nodes 20000 --avg-degree 20 --train 1000 --threads 1 --bootstrap 0 --deletion-threads 2"
for round in 1 2; do
  for side in after before; do
    dir=$root; [ $side = before ] && dir=$before
    (cd $dir && PYTHONPATH=$dir python bench/bench_scale.py $args --layers 2 --estimator step \
      --out $out/curvature36_gcn2_${side}_r$round.json) | tail -3
  done
  (cd $root && python bench/bench_scale.py $args --layers 1 --out $out/curvature36_gcn1_r$round.json) | tail -3
done
for side in after before; do
  dir=$root; [ $side = before ] && dir=$before
  (cd $dir && PYTHONPATH=$dir python bench/income_ratio.py --data-root $data --out $out/curvature36_income_$side.json)
done
