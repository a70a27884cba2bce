#!/usr/bin/env bash
# Issue 36's GPU checks in one call, for a session lent a device (device time is short: run this once, with the
# timeout the session has left, and read what it wrote even if a later step ran out of time):
#   bash bench/run_gpu36.sh "$OUT" full cuda_tests,gcn2_20k,gcn1_20k,gcn2_1m,memory   # first call (~5 min)
#   bash bench/run_gpu36.sh "$OUT" full sage2_10m                                      # second call (≤ 10 min)
#   bash bench/run_gpu36.sh /tmp/gpu36 small  # a dry run anywhere (CPU when there is no CUDA), small graphs, every step
# The third argument picks steps (comma-separated; default all). A device call may run 600 s at most, and a session's
# device time is ~15 minutes in all, starts included: hence two calls.
# In order of what the issue asks first, each step under its own time limit, its output in $1/<step>.txt and
# bench_scale's JSON beside it:
#   1. the CUDA tests (batched against sequential deletions and Hessian rows, the GPU agreement checks);
#   2. the 20,000-node two-layer GCN audit (goal ≤ 5 s) and the one-layer audit beside it;
#   3. the 10⁶-node two-layer GCN audit with 10⁴ training nodes (goal ≤ 30 s);
#   4. the memory per node of a deep model's full-graph passes (bench_memory.py, SAGE h128), on the GPU;
#   5. the 10⁷-node, 10⁸-edge two-layer SAGE audit, mini-batch training (goal ≤ 10 min, within an H100's memory).
# Stage lines ("[stage] …") are printed as each stage ends, so a step cut by its limit still says how far it got.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?an output directory}"
size="${2:-full}"
only="${3:-cuda_tests,gcn2_20k,gcn1_20k,gcn2_1m,memory,sage2_10m}"
mkdir -p "$out"
cd "$root"
device=cpu
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" && device=cuda
if [ "$size" = small ]; then
  n20=2000 n6=20000 t6=1000 n7=50000 t7=1000 mem=20000,40000 limit=120
else
  n20=20000 n6=1000000 t6=10000 n7=10000000 t7=10000 mem=1000000,2000000 limit=570
fi
step() {  # step <name> <seconds> <command...>
  local name="$1" seconds="$2"; shift 2
  case ",$only," in *",$name,"*) ;; *) return 0 ;; esac
  echo "== $name ($(date -u +%H:%M:%S), limit ${seconds} s)" | tee -a "$out/summary.txt"
  timeout "$seconds" "$@" > "$out/$name.txt" 2>&1
  echo "   exit $? after $SECONDS s in all" | tee -a "$out/summary.txt"
  grep -E "^\[stage\]|passed|failed|skipped|wrote|^\| (blocks|whole)" "$out/$name.txt" | tail -12 | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,memory.total --format=csv > "$out/device.txt" 2>&1 || echo "no nvidia-smi" > "$out/device.txt"
scale=(python bench/bench_scale.py --avg-degree 20 --bootstrap 0 --device "$device" --threads 8)
step cuda_tests 150 python -m pytest -q -p no:cacheprovider tests/core/test_cuda.py
step gcn2_20k 60 "${scale[@]}" --nodes "$n20" --train 1000 --layers 2 --estimator step --out "$out/gcn2_20k.json"
step gcn1_20k 40 "${scale[@]}" --nodes "$n20" --train 1000 --layers 1 --out "$out/gcn1_20k.json"
step gcn2_1m 150 "${scale[@]}" --nodes "$n6" --train "$t6" --layers 2 --estimator step --out "$out/gcn2_1m.json"
step memory 150 python bench/bench_memory.py --nodes "$mem" --device "$device" --threads 8 --out "$out/memory.json"
step sage2_10m "$limit" "${scale[@]}" --nodes "$n7" --train "$t7" --arch sage --layers 2 --hidden 128 \
  --epochs 100 --batch-size 512 --fan-out 10,-1 --out "$out/sage2_10m.json"
echo "device: $device; $(cat "$out/device.txt" | tail -1)" | tee -a "$out/summary.txt"
