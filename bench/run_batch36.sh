#!/usr/bin/env bash
# Issue 36's before/after, back to back: the commit before the batched deletions (BASE, unpacked by `git archive`
# into $BASE_DIR) against this tree, on the 20,000-node GCN (one and two layers, step estimate) and Income (one and two
# layers, the whole audit). Raw runs in docs/bench/batch36_*.{json,txt}.
set -u
BASE=${BASE:-6788ae0}
BASE_DIR=${BASE_DIR:-/tmp/base}
HERE=$(pwd)
OUT=$HERE/docs/bench
rm -rf "$BASE_DIR" && mkdir -p "$BASE_DIR" && git archive "$BASE" | tar -x -C "$BASE_DIR"
scale() {  # $1 before|after, $2 layers
  local dir=$HERE; [ "$1" = before ] && dir=$BASE_DIR
  (cd "$dir" && PYTHONPATH=$dir /usr/bin/time -f "$1 scale L$2: %e s wall, %U s user" python bench/bench_scale.py \
    --nodes 20000 --avg-degree 20 --train 1000 --layers "$2" --estimator step --threads 1 --bootstrap 0 \
    --out "$OUT/batch36_scale_$1_l$2.json" > "$OUT/batch36_scale_$1_l$2.txt" 2>&1; tail -1 "$OUT/batch36_scale_$1_l$2.txt")
}
income() {  # $1 before|after, $2 layers
  local dir=$HERE; [ "$1" = before ] && dir=$BASE_DIR
  (cd "$dir" && PYTHONPATH=$dir /usr/bin/time -f "$1 income L$2: %e s wall, %U s user" python -m app.cli run \
    --dataset income --data-root /work/shared/datasets --layers "$2" --threads 1 --debias-retrain adam \
    --json "$OUT/batch36_income_$1_l$2.json" > "$OUT/batch36_income_$1_l$2.txt" 2>&1; tail -1 "$OUT/batch36_income_$1_l$2.txt")
}
uptime
case "${1:-all}" in
  scale|all) scale before 2; scale after 2; scale before 1; scale after 1 ;;&
  income|all) income before 2; income after 2; income before 1; income after 1 ;;
esac
uptime
