"""Issue 36: where one deletion's CPU time goes (one thread): the step estimate's parts, timed by wrapping them.

    python bench/profile_deletions.py --nodes 20000 --arch gcn --count 100
    python bench/profile_deletions.py --dataset income --data-root ../shared/datasets --arch gat --layers 1 --count 20

Trains the model (two layers unless ``--layers``; on ``--dataset`` instead of the synthetic graph) as
``bench_deletions.py`` does, settles the first ``--count`` training nodes' deletions one
at a time (:meth:`Stepper.delete`) and prints the CPU milliseconds a deletion of each part: the proximal objective's
evaluations (forward and backward passes), Γ's read at the weights reached (``_test_proba``) and at ``θ̂``
(``_proba_at_hat``), the reducer and the computation-graph view, Γ itself, the damped solves. ``--cprofile`` prints
cProfile's top functions instead.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import time
from collections.abc import Callable
from typing import Any

import torch

import bind_core.influence.step as step_module
from bind_core.data.datasets import synthetic
from bind_core.data.datasets.registry import load
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Stepper
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train

SPENT: collections.defaultdict[str, float] = collections.defaultdict(float)
CALLS: collections.Counter[str] = collections.Counter()


def timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, adding its CPU seconds to ``SPENT[label]``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[label] += time.process_time() - start

    return wrapper


def counted(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, counting its calls in ``CALLS``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        CALLS["objective evaluations"] += 1
        return fn(*args, **kwargs)

    return wrapper


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=20000)
    p.add_argument("--arch", default="gcn")
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--epochs", type=int, default=1000, help="Adam's epochs (the audit's default: 1000)")
    p.add_argument("--cprofile", action="store_true")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dataset", default=None, help="a dataset of --data-root instead of the synthetic graph")
    p.add_argument("--data-root", default="../shared/datasets")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.dataset is None:
        graph = synthetic(args.nodes, num_features=16, avg_degree=20, seed=0, train_per_class=500)
    else:
        graph = load(args.dataset, args.data_root)
    model = train(graph, TrainConfig(epochs=args.epochs), ModelConfig(arch=args.arch, layers=args.layers, hidden=16))
    namespace = vars(step_module)  # the name the stepper calls, wrapped so that each objective it makes is timed
    objective = namespace["proximal_objective"]
    namespace["proximal_objective"] = lambda *a, **k: counted(timed("objective evaluations", objective(*a, **k)))
    stepper = Stepper.build(FunctionalModel.from_trained(model, graph))
    if stepper.fused is not None:  # the two-layer GCN's or SAGE's objective formed by hand
        fused_objective = stepper.fused.objective
        stepper.fused.objective = lambda *a, **k: counted(timed("objective evaluations", fused_objective(*a, **k)))  # type: ignore[method-assign]
    stepper.reducer.reduce = timed("reducer", stepper.reducer.reduce)  # type: ignore[method-assign]
    if stepper.view is not None:
        stepper.view = timed("computation-graph view", stepper.view)
    for name in ("_test_proba", "_proba_at_hat", "solve_damped", "gammas"):
        setattr(stepper, name, timed(name, getattr(stepper, name)))
    stepper.delete([args.count])  # warm-up, not counted
    SPENT.clear()
    CALLS.clear()
    profiler = cProfile.Profile() if args.cprofile else None
    start = time.process_time()
    if profiler is not None:
        profiler.enable()
    for position in range(args.count):
        stepper.delete([position])
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    total = time.process_time() - start
    print(f"{args.arch} {args.layers}, {graph.num_nodes} nodes: {total / args.count * 1e3:.2f} ms a deletion (CPU)")
    ranked = sorted(SPENT.items(), key=lambda item: -item[1])
    for label, seconds in [*ranked, ("rest", total - sum(SPENT.values()))]:
        print(f"  {label:24s} {seconds / args.count * 1e3:6.2f} ms  {100 * seconds / total:5.1f}%")
    for label, calls in CALLS.items():
        print(f"  {label}: {calls / args.count:.2f} a deletion")


if __name__ == "__main__":
    main()
