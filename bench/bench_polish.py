"""Issue 36: the training polish of a message-passing model, timed by part, per architecture and seed.

Each model is trained with Adam alone (``TrainConfig(polish=False)``: not timed), then polished with
``bind_core.training.polish.polish`` as ``train`` does (timed): L-BFGS, then the frozen-Hessian Newton finish where
L-BFGS stops short. Prints the seconds, the Newton finish's Hessians, steps and rounds, and where it ended (the
objective and its largest gradient entry), so two versions of the finish can be compared on the same start:

    python bench/bench_polish.py --datasets income --seeds 10,11 --archs gcn,sage --out docs/bench/refresh36_polish.json
    PYTHONPATH=/tmp/wt-before python bench/bench_polish.py ...   # an earlier version, from its worktree
"""

from __future__ import annotations

import time
from typing import Any

import _common as C

from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train
from bind_core.training.polish import polish


def run_one(graph: Any, arch: str, layers: int, seed: int, threads: int) -> dict[str, Any]:
    """Adam, then the polish timed; what the polish's record says."""
    model = train(graph, TrainConfig(seed=seed, polish=False), ModelConfig(arch=arch, layers=layers))
    start = time.perf_counter()
    polish(model, graph, threads=threads)
    seconds = time.perf_counter() - start
    newton = model.stationarity.newton
    return {
        "arch": arch,
        "layers": layers,
        "seed": seed,
        "polish_seconds": round(seconds, 2),
        "lbfgs_iterations": model.stationarity.iterations,
        "converged": model.stationarity.converged,
        "objective": float(model.objective(graph)),
        "newton": None
        if newton is None
        else {
            "seconds": round(newton.seconds, 2),
            "hessians": newton.hessians,
            "steps": newton.iterations,
            "rounds": newton.rounds,
            "max_abs_grad": newton.max_abs_grad,
            "negative_eigenvalues": newton.negative_eigenvalues,
        },
    }


def main() -> None:
    p = C.parser(__doc__.splitlines()[0], seeds="10")
    p.set_defaults(datasets="income")
    p.add_argument("--archs", default="gcn,sage", help="comma-separated architectures")
    p.add_argument("--layers", type=int, default=2, help="message-passing layers")
    p.add_argument("--polish-threads", type=int, default=1, help="threads forming the Hessian rows (train's threads)")
    args = p.parse_args()
    C.setup(args)
    runs = []
    for name, graph in C.datasets(args):
        for arch in args.archs.split(","):
            for seed in C.seeds(args):
                run = {"dataset": name, **run_one(graph, arch, args.layers, seed, args.polish_threads)}
                newton = run["newton"] or {}
                print(
                    f"{name} {arch}-{args.layers} seed {seed}: polish {run['polish_seconds']} s, "
                    f"Newton {newton.get('seconds')} s, {newton.get('hessians')} Hessians, "
                    f"{newton.get('steps')} steps, {newton.get('rounds')} rounds; "
                    f"objective {run['objective']:.12f}, converged {run['converged']}",
                    flush=True,
                )
                runs.append(run)
    C.write_json("bench_polish", {"machine": C.machine(), "args": vars(args), "runs": runs}, args.out)


if __name__ == "__main__":
    main()
