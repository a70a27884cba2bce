"""Issue 7 benchmark: one audit of a large synthetic graph, time and peak memory per stage.

The audit is ``bind_core.pipeline.audit.run_audit`` (training, polished where the audit polishes: one-layer models
by default, ``--polish``; metrics with 1000 bootstrap resamples, influence for every training node), on
``bind_core.data.datasets.synthetic`` with ``--nodes`` nodes, ``--nodes * --avg-degree / 2`` undirected edges and
``--train`` training nodes. Stages come from the audit's own progress callback; memory is the peak resident set size
sampled while each stage ran (and, on CUDA, the peak GPU allocation).

    python bench/bench_scale.py --nodes 1000000 --avg-degree 20 --train 10000     # the issue's audit
    python bench/bench_scale.py --nodes 1000000 --device cuda                     # on a GPU, when present

Mini-batch training (``TrainConfig.batch_size``/``fan_out``, issue 14), e.g. Adam alone, against full batch:

    python bench/bench_scale.py --nodes 20000 --train 1000 --layers 2 --threads 1 --bootstrap 0 \
        --stages training,metrics --no-polish --batch-size 256 --fan-out 10,10
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

import _common as C
from _stages import StageMeter

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.forks import fork_is_safe
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.training.fit import TrainConfig


def audit_once(
    nodes: int,
    avg_degree: float,
    train: int,
    *,
    features: int = 16,
    arch: str = "gcn",
    layers: int = 1,
    hidden: int = 16,
    estimator: str = "auto",
    epochs: int = 1000,
    bootstrap: int = 1000,
    device: str = "cpu",
    stages: tuple[str, ...] = ("training", "metrics", "influence"),
    polish: bool | None = None,
    batch_size: int = 0,
    fan_out: tuple[int, ...] = (),
    deletion_threads: int = 1,
) -> dict[str, Any]:
    meter = StageMeter(device=device, echo=True)
    with meter.stage("generate"):
        graph = synthetic(nodes, num_features=features, avg_degree=avg_degree, train_per_class=train // 2, seed=0)
    config = AuditConfig(
        model=ModelConfig(arch=arch, layers=layers, hidden=hidden),
        training=TrainConfig(epochs=epochs, polish=polish, batch_size=batch_size, fan_out=fan_out),
        stages=stages,
        bootstrap=bootstrap,
        validation_sample=0,
        **({} if estimator == "auto" else {"estimator": estimator}),
    )
    result = run_audit(
        graph, config, progress=lambda stage, _f: meter.switch(stage), device=device, deletion_threads=deletion_threads
    )
    stages = meter.close()
    inf = result.influence
    history = result.model.history
    return {
        "nodes": graph.num_nodes,
        "edges": graph.num_edges,
        "train": int(graph.train_idx.numel()),
        "test": int(graph.test_idx.numel()),
        "features": graph.num_features,
        "model": f"{arch}-{layers}",
        "parameters": result.model.num_parameters,
        "avg_train_neighbours": float(graph.degree[graph.train_idx].double().mean()),
        "stages": stages,
        "audit_timings": result.timings,
        "influence_timings": None if inf is None else inf.timings,
        "grad_norm": None if inf is None else inf.grad_norm,
        "stationarity": encode(result.model.stationarity),
        "history": encode(history),
        "adam_seconds_per_epoch": (history.seconds or 0.0) / max(history.epochs or 0, 1),
        "gamma": None if inf is None else inf.gamma,
        "accuracy": result.metrics.test.accuracy,
        "device": device,
        "deletion_threads": deletion_threads,
    }


def _polish(args: Any) -> bool | None:
    """``TrainConfig.polish`` from ``--polish`` and ``--no-polish``."""
    return False if args.no_polish else {"auto": None, "on": True, "off": False}[args.polish]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--avg-degree", type=float, default=20.0)
    p.add_argument("--train", type=int, default=10_000)
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--arch", default="gcn")
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--estimator", default="auto", help="auto | linear | step (AuditConfig.estimator)")
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--stages", default="training,metrics,influence", help="the audit's stages, comma-separated")
    p.add_argument(
        "--polish",
        choices=("auto", "on", "off"),
        default="auto",
        help="TrainConfig.polish: auto (the audit's default: one-layer models only), on, or off",
    )
    p.add_argument("--no-polish", action="store_true", help="the same as --polish off (Adam only)")
    p.add_argument("--batch-size", type=int, default=0, help="TrainConfig.batch_size: 0 full batch; > 0 mini-batches")
    p.add_argument("--fan-out", default="", help="TrainConfig.fan_out, comma-separated, the batch's hop first; -1 all")
    p.add_argument(
        "--deletion-threads", type=int, default=1, help="threads settling the step estimate's deletions at once"
    )
    p.add_argument(
        "--no-forks",
        action="store_true",
        help="keep an idle second thread alive, so that the deletions run on threads rather than forked processes "
        "(bind_core.forks.fork_is_safe: forks only from a process with one thread), for comparison",
    )
    p.add_argument("--out", default=None)
    args = p.parse_args()
    C.setup(args)
    if args.no_forks:
        threading.Thread(target=threading.Event().wait, daemon=True, name="keeps-threads").start()
    t0 = time.perf_counter()
    row = audit_once(
        args.nodes, args.avg_degree, args.train, features=args.features, arch=args.arch, layers=args.layers,
        hidden=args.hidden, estimator=args.estimator, epochs=args.epochs, bootstrap=args.bootstrap,
        device=args.device, stages=tuple(args.stages.split(",")), polish=_polish(args),
        batch_size=args.batch_size, fan_out=tuple(int(f) for f in args.fan_out.split(",") if f),
        deletion_threads=args.deletion_threads,
    )  # fmt: skip
    row["forks"] = fork_is_safe() and args.deletion_threads > 1  # the deletions ran in forked processes
    row["wall_seconds"] = time.perf_counter() - t0
    print(f"{row['nodes']:,} nodes, {row['edges']:,} edges, {row['train']:,} training nodes, {row['model']}")
    print(
        C.table(
            ["stage", "seconds", "CPU seconds", "peak RSS (GiB)", "children's peak RSS (GiB)", "peak CUDA (GiB)"],
            [
                [
                    k,
                    f"{v['seconds']:.2f}",
                    f"{v['cpu_seconds']:.2f}",
                    f"{v['peak_rss_gb']:.2f}",
                    f"{v['children_peak_rss_gb']:.2f}",
                    f"{v.get('peak_cuda_gb', float('nan')):.2f}",
                ]
                for k, v in row["stages"].items()
            ],
        )
    )
    print(
        f"Adam {row['adam_seconds_per_epoch'] * 1000:.1f} ms an epoch; test accuracy {row['accuracy']}; "
        f"grad norm {row['grad_norm']}; influence parts {row['influence_timings']}"
    )
    name = f"scale_{args.nodes}_{args.arch}{args.layers}_h{args.hidden}_{args.device.split(':')[0]}"
    if args.batch_size:
        name += f"_b{args.batch_size}_f{'-'.join(args.fan_out.split(',')) or 'all'}"
    if args.no_polish:
        name += "_adam"
    C.write_json(name, {"machine": C.machine(), "args": vars(args), "result": row}, args.out)


if __name__ == "__main__":
    main()
