#!/usr/bin/env bash
# Issue 36, per-deletion arithmetic: the commit before it (BASE, unpacked by `git archive` into $BASE_DIR) against this
# tree, back to back: the per-deletion benchmark (bench_deletions.py, GCN then SAGE), then the whole 20,000-node
# two-layer GCN audit twice each way, interleaved. Raw runs in docs/bench/speed36_*.{json,txt}.
set -u
BASE=${BASE:-f7af40e}
BASE_DIR=${BASE_DIR:-/tmp/base36}
HERE=$(pwd)
OUT=$HERE/docs/bench
rm -rf "$BASE_DIR" && mkdir -p "$BASE_DIR" && git archive "$BASE" | tar -x -C "$BASE_DIR"
cp "$HERE/bench/bench_deletions.py" "$BASE_DIR/bench/"  # the benchmark uses only API that BASE has too
tree() { if [ "$1" = before ]; then echo "$BASE_DIR"; else echo "$HERE"; fi; }
deletions() {  # $1 before|after, $2 arch
  local dir; dir=$(tree "$1")
  (cd "$dir" && PYTHONPATH=$dir python bench/bench_deletions.py --arch "$2" --count 100 --rounds 3 --label "$1 $2" \
    --out "$OUT/speed36_deletions_$2_$1.json")
}
audit() {  # $1 before|after, $2 round
  local dir; dir=$(tree "$1")
  (cd "$dir" && PYTHONPATH=$dir /usr/bin/time -f "$1 audit $2: %e s wall, %U s user" python bench/bench_scale.py \
    --nodes 20000 --avg-degree 20 --train 1000 --layers 2 --estimator step --threads 1 --bootstrap 0 \
    --out "$OUT/speed36_audit_$1$2.json" > "$OUT/speed36_audit_$1$2.txt" 2>&1; tail -1 "$OUT/speed36_audit_$1$2.txt")
}
uptime
case "${1:-all}" in
  deletions|all) deletions before gcn; deletions after gcn; deletions before sage; deletions after sage ;;&
  audit|all) audit before 1; audit after 1; audit before 2; audit after 2 ;;
esac
uptime
