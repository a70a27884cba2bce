"""The audit facade: train (or take) a model, measure its bias, attribute it to training nodes, debias, and
check the estimates against retraining. What the service's worker and the command line call."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from bind_core.codec import decode, encode
from bind_core.data.graph import Graph
from bind_core.data.labels import class_value, group_value, user_ids
from bind_core.data.records import CarriedInputs
from bind_core.debiasing.nodesets import check_budgets
from bind_core.debiasing.records import DebiasingRow, Validation
from bind_core.errors import ConfigError
from bind_core.explain.records import NodeProfile
from bind_core.fairness.records import Metrics
from bind_core.influence.curvature import Coordinates
from bind_core.influence.distributed import ChunkRunner
from bind_core.influence.edge_records import EdgeRow
from bind_core.influence.edge_rows import edge_rows, iter_edge_rows
from bind_core.influence.edges import EdgeInfluenceResult
from bind_core.influence.records import Refinement, Stability
from bind_core.influence.result import SIGN_CONVENTION, InfluenceResult
from bind_core.pipeline.budget import parameter_count
from bind_core.pipeline.caveat import Caveat, codes_of
from bind_core.pipeline.caveats import (
    AuditContext,
    estimate_warnings,
    metric_warnings,
    model_warnings,
    scaled_inputs,
    warnings_for,
)
from bind_core.pipeline.config import MAX_REFINE_STEPS, STAGES, AuditConfig
from bind_core.pipeline.edge_section import edges_not_computed
from bind_core.pipeline.edge_selfcheck import edge_validation_reason, edge_validation_stage
from bind_core.pipeline.label_check import many_classes
from bind_core.pipeline.output_order import supplied_model_warnings
from bind_core.pipeline.reference import prepare_model_for_audit
from bind_core.pipeline.results import AuditResults, InfluenceRow, SuppliedModel
from bind_core.pipeline.results_edges import EdgeAttribution
from bind_core.pipeline.stages import (
    EDGE_DEBIASING,
    EDGES,
    STABILITY,
    AuditProgress,
    InfluenceStage,
    StageRunner,
    Tick,
    check_refinable,
    debiasing_stage,
    edge_debiasing_reason,
    edge_debiasing_stage,
    edges_stage,
    influence_stage,
    metric_groups,
    metrics_stage,
    planned_stages,
    stability_stage,
    training_stage,
    validation_stage,
)
from bind_core.pipeline.summary import summarize
from bind_core.threads import check_threads
from bind_core.training.fit import TrainedModel
from bind_core.training.outputs import GivenOutputs
from bind_core.training.records import ModelSummary, Spectrum, Stationarity, StationarityCheck

__all__ = [
    "MAX_REFINE_STEPS",
    "STAGES",
    "AuditConfig",
    "AuditProgress",
    "AuditResult",
    "AuditResults",
    "run_audit",
    "warnings_for",
]


@dataclass
class AuditResult:
    """The outcome of :func:`run_audit`. ``to_dict`` is JSON-ready; ``influence_rows`` and ``edge_rows`` list every
    node and edge as typed rows (:func:`bind_core.codec.encode` makes one a JSON object).

    Attributes:
        graph: the graph audited.
        config: the settings it ran with.
        model: the model audited (trained by the audit, or supplied).
        metrics: the metrics stage's section (test metrics, per-group breakdown, histograms, intervals).
        influence: every training node's estimate; ``None`` when the influence stage did not run.
        debiasing: one row per budget; ``None`` when debiasing did not run.
        validation: the self-check; ``None`` when it did not run.
        stability: the top-k stability across seeds; ``None`` unless ``config.stability_seeds``.
        refinement: the estimates' refinement; ``None`` unless ``config.refine_steps``.
        profile: what the harmful nodes have in common (with influence).
        edges: with ``config.edges``, the edge attribution's section, or why it is empty.
        edge_estimate: every edge's estimate behind ``edges``, when computed.
        stationarity: how stationary the weights are, read before the influence stage.
        timings: stage → seconds, in the order the stages ran.
        device: where it ran.
        supplied: whether the model was supplied (``run_audit(model=...)``) rather than trained by the audit.
        supplied_model: for a model read from a supplied config (:meth:`TrainedModel.from_bytes`), what was done to
            it before the audit (the results' ``supplied_model``); ``None`` otherwise.
    """

    graph: Graph
    config: AuditConfig
    model: TrainedModel
    metrics: Metrics
    influence: InfluenceResult | None = None
    debiasing: list[DebiasingRow] | None = None
    validation: Validation | None = None
    stability: Stability | None = None
    refinement: Refinement | None = None
    profile: NodeProfile | None = None
    """What the harmful nodes have in common (with influence; :mod:`bind_core.explain.profile`)."""
    edges: EdgeAttribution | None = None
    """With ``config.edges``: the edge attribution's section (:mod:`bind_core.pipeline.edge_section`)."""
    edge_estimate: EdgeInfluenceResult | None = None
    """Every edge's estimate behind ``edges`` (when computed); :meth:`edge_rows` lists them."""
    stationarity: StationarityCheck | None = None
    """How stationary the weights are, read before the influence stage
    (:func:`bind_core.training.stationarity.describe_stationarity`; information, never a refusal)."""
    timings: dict[str, float] = field(default_factory=dict)
    device: str = "cpu"
    supplied: bool = False
    supplied_model: SuppliedModel | None = None

    def to_dict(self) -> dict[str, Any]:
        """Everything the audit produced, JSON-ready (what the CLI's ``--json`` writes and the service stores).

        Returns:
            The results document: :meth:`typed` encoded (one key per section of
            :class:`~bind_core.pipeline.results.AuditResults`: null for a stage that did not run; ``profile`` and
            ``edges`` only where computed or asked for), with the warnings, the sign convention and ``summary``, the
            verdict first.
        """
        return encode(self.typed())

    def warnings(self) -> list[Caveat]:
        """The caveats about the graph, the metrics, the model and the estimates.

        Returns:
            One sentence per caveat, each naming its cause (the results' ``warnings``), each a
            :class:`~bind_core.pipeline.caveat.Caveat` (a ``str``) with its stable ``code`` (the results'
            ``warning_codes``); empty when there is none.
        """
        return (
            warnings_for(self.graph, self.config.min_group_size)
            + (scaled_inputs(self.graph) if self.supplied and not self._outputs_confirmed() else [])
            + metric_warnings(self.metrics)
            + supplied_model_warnings(self.supplied_model)
            + self._label_warnings()
            + self._estimate_warnings()
        )

    def _outputs_confirmed(self) -> bool:
        """The supplied model's own outputs on this graph were given and it gives them: the scaling is the owner's."""
        record = self.supplied_model
        return record is not None and record.outputs is not None and record.outputs.matches

    def _label_warnings(self) -> list[Caveat]:
        """A label of many classes with few nodes each (a continuous column): what its figures then describe."""
        graph = self.graph.summary()
        found = many_classes(graph.label, graph.class_names or [], graph.class_sizes)
        return [] if found is None else [Caveat(found, "many_classes")]

    def typed(self) -> AuditResults:
        """The results, typed.

        Returns:
            The :class:`~bind_core.pipeline.results.AuditResults`, with the ``summary`` written from them.
        """
        warnings = self.warnings()
        results = AuditResults(
            metrics=self.metrics,
            influence_summary=None if self.influence is None else self.influence.summary(),
            top_harmful=self._top("harmful"),
            top_helpful=self._top("helpful"),
            debiasing=self.debiasing,
            validation=self.validation,
            stability=self.stability,
            refinement=self.refinement,
            stationarity=self._stationarity(),
            training=self.model.history,
            model=_model_summary(self.model),
            graph=self.graph.summary(),
            timings=dict(self.timings),
            device=self.device,
            warnings=[str(w) for w in warnings],
            warning_codes=codes_of(warnings),
            sign_convention=SIGN_CONVENTION,
            profile=self.profile,
            edges=self._edges(),
            supplied_model=self.supplied_model,
        )
        results.summary = summarize(results)
        return results

    def _edges(self) -> EdgeAttribution | None:
        """The ``edges`` section: absent unless asked for; asked for without the influence stage, why it is empty."""
        if not self.config.edges:
            return None
        return self.edges or dataclasses.replace(
            edges_not_computed("the influence stage did not run (edges build on it)"),
            validation_reason="the edges were not attributed",
        )

    def _stationarity(self) -> Stationarity:
        """The polish's record, the audit's check (its figures in place of the polish's, the kink check's record in
        ``extra["kinks"]``) and, with influence, the Hessian's spectrum at the weights."""
        out = dataclasses.replace(self.model.stationarity, extra=dict(self.model.stationarity.extra))
        check = self.stationarity
        if check is not None:
            out.max_abs_grad, out.grad_norm, out.tolerance = check.max_abs_grad, check.grad_norm, check.tolerance
            out.stationary = check.stationary
            if check.kinks is not None:
                out.extra["kinks"] = encode(check.kinks)
        if self.influence is not None:
            d = self.influence.solve.details
            keys = ("max_eigenvalue", "min_eigenvalue", "below_weight_decay", "dropped_eigenvalues", "damping")
            found = {k: d[k] for k in keys if k in d}
            out.spectrum = decode(Spectrum, found, "stationarity.spectrum") if found else None
        return out

    def influence_rows(self) -> list[InfluenceRow]:
        """Every training node's estimate, as rows.

        Returns:
            One :class:`~bind_core.pipeline.results.InfluenceRow` per training node, in ``train_idx`` order
            (``position``), with ``node_id`` the user's id (the id column's value, text as written, else the row's
            position counted from 0), ``group`` and ``label`` the graph's codes and ``group_name`` and
            ``label_name`` what the user's data writes for them; empty when influence was not computed.
        """
        if self.influence is None:
            return []
        g, inf = self.graph, self.influence
        idx = g.train_idx
        return [
            InfluenceRow(
                position=i,
                node_index=int(node),
                node_id=nid,
                group=int(grp),
                label=int(lab),
                group_name=group_value(g, int(grp)),
                label_name=class_value(g, int(lab)),
                delta=_number(d),
                delta_sp=_number(dsp),
                delta_eo=_number(deo),
                settled=ok,
                no_minimum=True if far else None,
            )
            for i, (node, nid, grp, lab, d, dsp, deo, ok, far) in enumerate(
                zip(
                    idx.tolist(),
                    user_ids(g, idx.tolist()),
                    g.sens[idx].tolist(),
                    g.y[idx].tolist(),
                    inf.delta.tolist(),
                    inf.delta_sp.tolist(),
                    inf.delta_eo.tolist(),
                    [None] * len(idx) if inf.settled is None else inf.settled.tolist(),
                    [False] * len(idx) if inf.no_minimum is None else inf.no_minimum.tolist(),
                    strict=True,
                )
            )
        ]

    def edge_rows(self) -> list[EdgeRow]:
        """Every undirected edge's estimate, as rows.

        Returns:
            One :class:`~bind_core.influence.edge_records.EdgeRow` per undirected edge
            (:func:`bind_core.influence.edge_rows.edge_rows`); empty when edges were not attributed.
        """
        return [] if self.edge_estimate is None else edge_rows(self.graph, self.edge_estimate)

    def iter_edge_rows(self) -> Iterator[EdgeRow]:
        """:meth:`edge_rows` made a batch at a time (what the service stores: millions of edges, bounded memory).

        Returns:
            An iterator over the same rows as :meth:`edge_rows`.
        """
        return iter(()) if self.edge_estimate is None else iter_edge_rows(self.graph, self.edge_estimate)

    def _estimate_warnings(self) -> list[Caveat]:
        return model_warnings(self.model.model_config, self.stationarity) + estimate_warnings(
            self.influence,
            self.validation,
            self.refinement,
            AuditContext(self.graph, self.model.model_config, self.config.lam),
        )

    def _top(self, direction: str, k: int = 10) -> list[InfluenceRow] | None:
        """The ``k`` most harmful (ΔΓ < 0, most negative first) or helpful training nodes; ``None`` without
        influence."""
        if self.influence is None:
            return None
        inf, g = self.influence, self.graph
        harmful = direction == "harmful"
        delta = inf.delta.double()
        order = torch.argsort(delta if harmful else -delta, stable=True)[:k].tolist()
        rows = []
        for i in order:
            value = float(delta[i])
            if not (value < 0 if harmful else value > 0):  # NaN (no value answers it) is neither
                continue
            node = int(g.train_idx[i])
            rows.append(
                InfluenceRow(
                    position=i,
                    node_index=node,
                    node_id=user_ids(g, [node])[0],
                    group=int(g.sens[node]),
                    label=int(g.y[node]),
                    group_name=group_value(g, int(g.sens[node])),
                    label_name=class_value(g, int(g.y[node])),
                    delta=float(inf.delta[i]),
                    delta_sp=float(inf.delta_sp[i]),
                    delta_eo=float(inf.delta_eo[i]),
                    settled=None if inf.settled is None else bool(inf.settled[i]),
                )
            )
        return rows


def _number(value: float) -> float | None:
    """``value``, or ``None`` where it is NaN (a node without a minimum near the weights: no value answers it)."""
    return None if math.isnan(value) else float(value)


def _model_summary(model: TrainedModel) -> ModelSummary:
    """The result's ``model``: the parameter count and the model's configuration (its other settings in ``extra``)."""
    settings = model.model_config.to_dict()
    named = {name: settings.pop(name) for name in ("arch", "layers", "hidden", "dropout", "heads", "activation")}
    return ModelSummary(parameters=model.num_parameters, **named, extra=settings)


def run_audit(
    graph: Graph,
    config: AuditConfig | None = None,
    *,
    progress: AuditProgress | None = None,
    model: TrainedModel | None = None,
    device: str | torch.device = "cpu",
    chunk_runner: ChunkRunner | None = None,
    keep: Callable[[int, TrainedModel], None] | None = None,
    deletion_threads: int = 1,
    on_warnings: Callable[[list[Caveat]], None] | None = None,
    carried: CarriedInputs | None = None,
    outputs: GivenOutputs | None = None,
) -> AuditResult:
    """Run the audit's stages on ``graph`` (see :data:`STAGES` and :func:`~bind_core.pipeline.stages.planned_stages`)
    and return everything they produced.

    Args:
        graph: the graph to audit, with its split.
        config: what to run and how (default :class:`AuditConfig`: the paper's GCN and budgets).
        progress: ``progress(stage, fraction)``; see below.
        model: a model to audit as given (skips training); default: train one with ``config``'s recipe.
        device: where to compute.
        chunk_runner: computes the linear estimate's per-node terms from its plan; see below.
        keep: ``keep(i, model)`` is handed the ``i``-th debiasing budget's retrained model as the debiasing stage
            trains it (:func:`~bind_core.debiasing.debias.debias`), e.g. to store it
            (:func:`~bind_core.training.export.export_model`); by default it is discarded.
        deletion_threads: how many CPU threads, or forked processes, share out the audit's independent pieces of
            work: a multi-layer model's deletions (the step estimate's nodes and settled edges,
            :mod:`~bind_core.influence.threads`) and the validation's re-optimisations, in forked processes where
            that is safe (:func:`~bind_core.forks.fork_is_safe`: one Python thread, one torch thread, as
            ``bind-audit run`` runs), else on threads; the rows of its Hessians (the training polish's Newton finish,
            the estimate's curvature) on threads; and the debiasing's retrainings for its check against chance, in
            forked processes only (they draw from torch's global generator; :func:`~bind_core.forks.each_self_seeded`).
            The results do not depend on it.
        on_warnings: ``on_warnings(warnings)`` is handed, once the model and its metrics are in and before the
            influence stage's minutes, the warnings known by then (each a ``str`` with its ``code``; the graph's, the
            metrics', a supplied model's checks:
            one that does no better than a constant on its own training nodes, outputs in another order), where
            there are any; the results' ``warnings`` repeat them, with the estimates' after them.
        carried: with a supplied ``model`` on another version of the graph it was registered for, what
            :func:`~bind_core.data.carry.carry_inputs` did to ``graph`` (the model's inputs carried over to its
            registration's): recorded as ``supplied_model.carried``, and the attribution finding says what ΔΓ then
            means.

        outputs: with a supplied ``model`` (:meth:`TrainedModel.from_bytes`), its own outputs on ``graph`` as its
            owner's code computes them (:meth:`GivenOutputs.of <bind_core.training.outputs.GivenOutputs.of>`,
            :func:`~bind_core.training.outputs.read_outputs`): the model as read must give them
            (:class:`~bind_core.training.outputs.OutputsDifferError`, saying what most likely differs), and where it
            does its inputs are confirmed (``supplied_model.outputs``; the fit check no longer doubts them).
    Returns:
        An :class:`AuditResult`: the model, its metrics, the influence estimate and every other stage's section;
        ``typed()`` gives them as :class:`~bind_core.pipeline.results.AuditResults`.

    ``progress(stage, fraction)`` is called as each stage advances, also inside every long loop (training epochs,
    the polish's evaluations and Newton steps, Hessian columns, solver iterations, the per-node terms, every
    retraining), so that the work can be stopped within about one such step: when it returns ``False`` the audit
    stops with :class:`~bind_core.errors.AuditCancelled`; it may also raise (its exception propagates). A supplied
    ``model`` skips training (the paper's setting: a given GNN trained on the graph). ``chunk_runner``
    computes the influence estimate's per-node terms from its plan (e.g. spread over workers; see
    :mod:`bind_core.influence.distributed.plan`); by default they are computed here.
    """
    check_threads(deletion_threads, "deletion_threads")  # before the training's minutes
    config = config or AuditConfig()
    if model is None:  # the recipe's polish decided once, for the training and every retraining after it
        config = config.with_polish_decided(parameter_count(config.model, graph.num_features, graph.num_classes))
    else:  # the result's config describes the model audited, not the defaults for one the audit would train
        config = config.describing(model.model_config, model.train_config)
    plan = planned_stages(config)
    stages = StageRunner(progress)
    if "debiasing" in plan:  # a count over the training set, refused before the training's minutes
        check_budgets(config.budgets, int(graph.train_idx.numel()))
    if model is not None:  # before anything runs it: torch's own error names neither the model nor the graph
        model.module.require_fit(graph)
    if config.refine_steps and "influence" in plan:
        check_refinable(model, graph, config)
    trained, record = stages.run(
        "training",
        lambda: _audited_model(
            graph,
            config,
            model,
            stages.tick,
            device=device,
            threads=deletion_threads,
            carried=carried,
            outputs=outputs,
        ),
    )
    groups = metric_groups(graph, config.min_group_size)
    metrics = stages.run("metrics", lambda: metrics_stage(trained, graph, config, groups), report_end=True)
    result = AuditResult(
        graph,
        config,
        trained,
        metrics,
        timings=stages.timings,
        device=str(device),
        supplied=model is not None,
        supplied_model=record,
    )
    if on_warnings is not None and (known := result.warnings()):
        on_warnings(known)
    if "influence" not in plan:
        return result
    found = stages.run(
        "influence",
        lambda: influence_stage(
            trained,
            graph,
            config,
            groups,
            progress=stages.tick,
            chunk_runner=chunk_runner,
            deletion_threads=deletion_threads,
        ),
    )
    result.stationarity, result.influence, result.refinement, result.profile = found[:4]
    after = _AfterInfluence(result, stages, plan, groups, found, device, keep, deletion_threads)
    after.edges()
    after.debiasing()
    after.validation()
    after.stability()
    return result


def _audited_model(
    graph: Graph,
    config: AuditConfig,
    model: TrainedModel | None,
    tick: Tick,
    *,
    device: str | torch.device,
    threads: int,
    carried: CarriedInputs | None = None,
    outputs: GivenOutputs | None = None,
) -> tuple[TrainedModel, SuppliedModel | None]:
    """The model to audit and, for one read from a supplied config, the record of what was done to it: trained
    here; a supplied one prepared as the command line and the service prepare it
    (:func:`~bind_core.pipeline.reference.prepare_model_for_audit`: fit, reproduction, class order, float64), or
    already prepared by them (its record kept with it); or a model trained here earlier, as it is."""
    if outputs is not None and (model is None or model.supplied is None or model.supplied.record is not None):
        raise ConfigError(
            "outputs: a supplied model's own outputs are compared with it as it is read (TrainedModel.from_bytes), "
            "before it is prepared; this audit has no such model"
        )
    if model is None or model.supplied is None:
        return training_stage(graph, config, model, progress=tick, device=device, threads=threads), None
    if model.supplied.record is None:
        return prepare_model_for_audit(
            model, graph, config, device, progress=lambda f: tick("training", f), carried=carried, outputs=outputs
        )
    record = decode(SuppliedModel, dict(model.supplied.record), "supplied_model")
    record.carried = carried or record.carried
    return model, record


@dataclass
class _AfterInfluence:
    """The stages that build on the influence estimate, in the order they run: edges, debiasing (nodes, then
    edges), validation (nodes, then edges) and stability; each fills its part of ``result``."""

    result: AuditResult
    stages: StageRunner
    plan: tuple[str, ...]
    groups: list[int] | None
    found: InfluenceStage
    device: str | torch.device
    keep: Callable[[int, TrainedModel], None] | None = None
    deletion_threads: int = 1

    def edges(self) -> None:
        r, config = self.result, self.result.config
        if not config.edges:
            return
        edges = self.stages.run(
            EDGES,
            lambda: edges_stage(
                r.model,
                r.graph,
                config,
                self.groups,
                self.found.plan,
                progress=self.stages.tick,
                stepper=self.found.stepper,
                deletion_threads=self.deletion_threads,
            ),
            report_start=False,
        )
        r.edges, r.edge_estimate = edges.section, edges.estimate

    def debiasing(self) -> None:
        r, config, influence, tick = self.result, self.result.config, self.found.influence, self.stages.tick
        if "debiasing" in self.plan:
            r.debiasing = self.stages.run(
                "debiasing",
                lambda: debiasing_stage(
                    r.model,
                    r.graph,
                    config,
                    influence,
                    self.groups,
                    progress=tick,
                    keep=self.keep,
                    stepper=self.found.stepper,
                    processes=self.deletion_threads,
                ),
            )
        if not (config.edges and r.edges is not None and r.edges.computed):
            return
        estimate, why_not = r.edge_estimate, edge_debiasing_reason(config, r.edge_estimate)
        if why_not is None and estimate is not None:
            r.edges.debiasing = self.stages.run(
                EDGE_DEBIASING,
                lambda: edge_debiasing_stage(
                    r.model, r.graph, config, estimate, self.groups, progress=tick, processes=self.deletion_threads
                ),
            )
        else:
            r.edges.debiasing_reason = why_not

    def validation(self) -> None:
        """The nodes' self-check, then the edges'; the stage's progress: the nodes' share, then the edges' (by
        re-optimisations)."""
        r, config, tick = self.result, self.result.config, self.stages.tick
        edge_why = edge_validation_reason(config, r.edge_estimate)
        edge_check = r.edge_estimate if edge_why is None else None
        edge_count = 0 if edge_check is None else min(config.edge_validation_sample, int(edge_check.affects.sum()))
        checks = config.validation_sample + edge_count
        share = config.validation_sample / checks if checks else 1.0
        if "validation" in self.plan:
            r.validation = self.stages.run(
                "validation",
                lambda: validation_stage(
                    r.model,
                    r.graph,
                    config,
                    self.found.influence,
                    self.groups,
                    progress=lambda st, f: tick(st, share * f),
                    threads=self.deletion_threads,
                    coordinates=self._coordinates(),
                ),
            )
        if not (config.edges and r.edges is not None):
            return
        if edge_check is None:
            r.edges.validation_reason = edge_why
            return
        nodes_seconds = self.stages.timings.get("validation", 0.0)
        r.edges.validation = self.stages.run(
            "validation",
            lambda: edge_validation_stage(
                r.model,
                r.graph,
                config,
                edge_check,
                self.groups,
                progress=lambda st, f: tick(st, share + (1 - share) * f),
                coordinates=self._coordinates(),
            ),
            report_start=False,
        )
        self.stages.timings["validation"] += nodes_seconds  # the stage's time: the nodes' check and the edges'

    def _coordinates(self) -> Coordinates | None:
        """The coordinates of the influence estimate's damped curvature, for the proximal ground truths (``None``
        without a step estimate)."""
        stepper = self.found.stepper
        return None if stepper is None else stepper.curvature.coordinates()

    def stability(self) -> None:
        r, config = self.result, self.result.config
        if config.stability_seeds:
            r.stability = self.stages.run(
                STABILITY,
                lambda: stability_stage(
                    r.graph, config, self.found.influence, progress=self.stages.tick, device=self.device
                ),
                report_start=False,
            )
