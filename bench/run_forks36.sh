#!/usr/bin/env bash
# Issue 36: the 20,000-node two-layer GCN audit as the last stop left it (two deletion threads) and now with one
# deletion thread, two on threads (--no-forks) and two in forked processes (bind_core.forks), interleaved, two
# rounds, with the one-layer audit beside them, one torch thread throughout. "Before" is a worktree of the commit
# the stop started from:
#   git worktree add /tmp/wt-before 7fdf319 && bash bench/run_forks36.sh /tmp/wt-before
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
before="${1:?the before worktree}"
out="$root/docs/bench"
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=68719476736
common=(--nodes 20000 --avg-degree 20 --train 1000 --threads 1 --bootstrap 0)
two=("${common[@]}" --layers 2 --estimator step)
run() {  # run <name> <dir> <options...>
  local name="$1" dir="$2"; shift 2
  (cd "$dir" && PYTHONPATH=$PWD python bench/bench_scale.py "$@" --out "$out/forks36_$name.json" \
    > "$out/forks36_$name.txt")
  grep -E "^\| (training|influence)" "$out/forks36_$name.txt" | tr -s ' ' | sed "s/^/$name /"
}
rm -f "$out"/forks36_*
for round in 1 2; do
  run "gcn2_before_t2_r$round" "$before" "${two[@]}" --deletion-threads 2
  run "gcn2_one_r$round" "$root" "${two[@]}" --deletion-threads 1
  run "gcn2_threads_r$round" "$root" "${two[@]}" --deletion-threads 2 --no-forks
  run "gcn2_forks_r$round" "$root" "${two[@]}" --deletion-threads 2
  run "gcn1_r$round" "$root" "${common[@]}" --layers 1
done
