"""Issue 36: the Income audit with two layers against one, as ``bind-audit run`` runs it, each as its own process.

    python bench/income_ratio.py --data-root ../shared/datasets --out docs/bench/threads36_income_ratio.json
    python bench/income_ratio.py --extra "--chance-seconds 0" --out docs/bench/threads36_income_ratio_nochance.json
    python bench/income_ratio.py --variants layers_2_threads_2 --out docs/bench/refresh36_income_after.json

Runs ``python -m app.cli run --dataset income --layers L --threads 1 --debias-retrain adam --quiet --json F`` for
each variant (two layers with one deletion thread and with two, then one layer), records wall and user seconds
and the audit's stage seconds from its JSON, and prints the two-layer / one-layer ratios (wall).
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

VARIANTS = {"layers_2_threads_1": (2, 1), "layers_2_threads_2": (2, 2), "layers_1": (1, 2)}


def run(data_root: str, layers: int, threads: int, extra: list[str]) -> dict[str, Any]:
    """One audit process: its wall and user seconds and its stages' seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "audit.json"
        command = [
            sys.executable, "-m", "app.cli", "run", "--dataset", "income", "--data-root", data_root,
            "--layers", str(layers), "--threads", "1", "--deletion-threads", str(threads),
            "--debias-retrain", "adam", "--quiet", "--json", str(out), *extra,
        ]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        user = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
        doc = json.loads(out.read_text())
    check = doc.get("validation") or {}
    test = (doc.get("metrics") or {}).get("test") or {}
    return {
        "wall_s": round(wall, 2),
        "user_s": round(user, 2),
        "stages_s": doc["timings"],
        "polished": (doc.get("config") or {}).get("training", {}).get("polish"),
        "accuracy": test.get("accuracy"),
        "self_check": {k: check.get(k) for k in ("pearson", "spearman", "count", "mode")},
        "unsettled": (doc.get("influence_summary") or {}).get("solver_details", {}).get("unsettled"),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-root", default="../shared/datasets")
    p.add_argument(
        "--extra",
        default="",
        help="more options for every run, e.g. '--chance-seconds 0': the debiasing's check against chance runs by "
        "default only when its retrainings fit 60 s at the model's measured training speed, so a two-layer audit near "
        "that line runs it or not from one run to the next; fixing it compares the same work",
    )
    p.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"which audits to run, comma-separated, of {', '.join(VARIANTS)} (layers_1 always runs: the base)",
    )
    p.add_argument("--out", default=None)
    args = p.parse_args()
    extra = args.extra.split()
    wanted = {*args.variants.split(","), "layers_1"}
    if unknown := wanted - set(VARIANTS):
        p.error(f"--variants: unknown {', '.join(sorted(unknown))}")
    runs = {name: run(args.data_root, *spec, extra) for name, spec in VARIANTS.items() if name in wanted}
    one = runs["layers_1"]["wall_s"]
    record = {
        "command": "python -m app.cli run --dataset income --layers L --threads 1 --deletion-threads T "
        f"--debias-retrain adam --quiet --json ... {args.extra}".strip(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.processor() or platform.machine()}, load average {Path('/proc/loadavg').read_text()}",
        "runs": runs,
        "ratio_wall": {name: round(r["wall_s"] / one, 2) for name, r in runs.items() if name != "layers_1"},
    }
    for name, r in runs.items():
        print(
            f"{name}: {r['wall_s']} s wall, {r['user_s']} s user; stages {r['stages_s']}; polished {r['polished']}, "
            f"test accuracy {r['accuracy']}, self-check {r['self_check']}, unsettled {r['unsettled']}"
        )
    print("two layers / one layer (wall):", record["ratio_wall"])
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
