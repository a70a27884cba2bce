"""Shared helpers for the bench/ scripts: arguments, dataset loading, statistics, tables and JSON output."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from app.core.allocator import reexec_tuned
from bind_core.codec import encode
from bind_core.data.datasets import available, canonical_name, load
from bind_core.data.graph import Graph

OUT_DIR = Path(__file__).resolve().parent / "out"

# The paper's Table 2 (percent) and the reference code's runs on this machine kind (see ANCHORS.md).
PAPER: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "income": {
        "vanilla": {"acc": (74.7, 1.4), "dsp": (25.9, 1.9), "deo": (32.3, 0.8)},
        "bind_1": {"acc": (75.2, 0.0), "dsp": (19.2, 0.6), "deo": (26.4, 0.4)},
        "bind_10": {"acc": (71.7, 0.7), "dsp": (14.7, 1.4), "deo": (16.2, 2.0)},
    },
    "recidivism": {
        "vanilla": {"acc": (89.8, 0.0), "dsp": (7.47, 0.2), "deo": (5.23, 0.1)},
        "bind_1": {"acc": (88.7, 0.0), "dsp": (7.40, 0.0), "deo": (5.09, 0.1)},
        "bind_10": {"acc": (88.5, 0.2), "dsp": (6.57, 0.2), "deo": (4.23, 0.2)},
    },
}
REFERENCE_CODE: dict[str, dict[str, float]] = {
    "income": {"acc": 70.7, "dsp": 31.3, "deo": 36.0, "train_s_1thread": 28.0, "influence_s": 236.0},
    "recidivism": {"acc": 88.5, "dsp": 7.0, "deo": 4.2, "train_s_1thread": 242.0, "influence_s": 1976.0},
}


def parser(description: str, *, seeds: str = "1,10,100") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data-root", default="../shared/datasets", help="folder holding the datasets")
    p.add_argument("--datasets", default="income,recidivism", help="comma-separated dataset names")
    p.add_argument("--seeds", default=seeds, help="comma-separated training seeds")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--out", default=None, help="JSON output path (default bench/out/<name>.json)")
    p.add_argument(
        "--synthetic", type=int, default=0, help="use a seeded synthetic graph of this many nodes instead (tests)"
    )
    return p


def setup(args: argparse.Namespace) -> None:
    """Every benchmark's first step: the service's allocator settings (:mod:`app.core.allocator`: the process
    restarts once with them unless ``GLIBC_TUNABLES`` is set), then the torch threads."""
    reexec_tuned()
    torch.set_num_threads(args.threads)


def seeds(args: argparse.Namespace) -> list[int]:
    return [int(s) for s in str(args.seeds).split(",") if s.strip()]


def datasets(args: argparse.Namespace) -> list[tuple[str, Graph]]:
    """The requested datasets that are present under ``--data-root`` (absent ones are skipped, with a note)."""
    if args.synthetic:
        from bind_core.data.datasets import synthetic

        return [("synthetic", synthetic(args.synthetic, seed=0))]
    root = Path(args.data_root)
    present = {info.name for info in available(root) if info.present}
    out = []
    for raw in str(args.datasets).split(","):
        if not raw.strip():
            continue
        name = canonical_name(raw.strip())
        if name not in present:
            print(f"[skip] {name}: not present under {root}")
            continue
        out.append((name, load(name, root)))
    return out


def machine() -> dict[str, Any]:
    load_avg = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
        "load_average": list(load_avg),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES"),
    }


def load_average() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not vals:
        return math.nan, math.nan
    return statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0


def fmt(mean: float, std: float | None = None, digits: int = 1) -> str:
    if mean is None or math.isnan(mean):
        return "–"
    if std is None:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table (readable in the terminal too)."""
    cells = [[str(h) for h in headers], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep, *[line(r) for r in cells[1:]]])


def write_json(name: str, payload: dict[str, Any], path: str | None = None) -> Path:
    target = Path(path) if path else OUT_DIR / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(payload, indent=2, default=_default))
    print(f"\nwrote {target}")
    return target


def _default(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.tolist()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # a typed result: its JSON form
        return encode(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return str(obj)
