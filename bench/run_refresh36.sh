#!/usr/bin/env bash
# Issue 36: the Newton finish's refreshes doubled (bind_core.training.newton, refresh_limit). The Income two-layer
# polish before (a worktree, e.g. `git worktree add /tmp/wt-before 255be5e`) and after (this checkout), side by side
# on the two cores, one configuration at a time; raw JSON in docs/bench/refresh36_polish_*. Then the Income ratio
# after and before (bench/income_ratio.py, two workers) and after with the check against chance off.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
before="${1:?the before worktree, e.g. git worktree add /tmp/wt-before 255be5e}"
data="${2:-$root/../shared/datasets}"
out=$root/docs/bench
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=68719476736
for cfg in "gcn 10" "gcn 11" "sage 10"; do
  set -- $cfg
  (cd "$root" && python bench/bench_polish.py --data-root "$data" --archs "$1" --seeds "$2" \
    --out "$out/refresh36_polish_after_$1_$2.json") &
  (cd "$before" && PYTHONPATH=$before python "$root/bench/bench_polish.py" --data-root "$data" --archs "$1" --seeds "$2" \
    --out "$out/refresh36_polish_before_$1_$2.json")
  wait
done
ratio="--data-root $data --variants layers_2_threads_2"
(cd "$root" && python bench/income_ratio.py $ratio --out "$out/refresh36_income_after.json")
(cd "$before" && PYTHONPATH=$before python "$root/bench/income_ratio.py" $ratio --out "$out/refresh36_income_before.json")
(cd "$root" && python bench/income_ratio.py $ratio --extra "--chance-seconds 0" --out "$out/refresh36_income_after_nochance.json")
