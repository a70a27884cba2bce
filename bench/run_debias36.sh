#!/usr/bin/env bash
# Issue 36: the Income audit as `bind-audit run` runs it (the check against chance fixed on), before (a worktree,
# e.g. of 597dadb) and after (this checkout), interleaved, two rounds; raw JSON in docs/bench/debias36_*.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
before="${1:?the before worktree, e.g. git worktree add /tmp/wt-before 597dadb}"
data="${2:-$root/../shared/datasets}"
out=$root/docs/bench
for round in 1 2; do
 for layers in 2 1; do
  for side in before after; do
    dir=$root; [ $side = before ] && dir=$before
    name=debias36_income_l${layers}_${side}_r${round}
    (cd $dir && PYTHONPATH=$dir /usr/bin/time -f "%e s wall, %U s user" python -m app.cli run --dataset income --data-root $data \
      --layers $layers --threads 1 --deletion-threads 2 --debias-retrain adam --debias-seeds 1,10,100 --quiet --json $out/$name.json) 2> /tmp/$name.time
    echo "$name $(tail -1 /tmp/$name.time) $(python3 -c "import json;d=json.load(open('$out/$name.json'));print({k:round(v,1) for k,v in d['timings'].items()})")"
  done
 done
done
