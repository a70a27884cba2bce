"""An audit as plain text (what ``bind-audit run`` prints): the verdict first, then the numbers behind it, every
group by its name and every node by the user's id."""

from __future__ import annotations

from typing import Any

from bind_core.explain.summary import edge_lines, profile_lines
from bind_core.pipeline.audit import AuditResult

__all__ = ["render", "render_supplied"]

_TEST_KEYS = ("accuracy", "auc", "f1", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo")
_AFTER_KEYS = ("accuracy", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo")
_BIAS_NAMES = {"delta_sp": "ΔSP", "delta_eo": "ΔEO", "gamma": "Γ"}


def _pct(v: float | None) -> str:
    return "   –  " if v is None else f"{100 * v:6.2f}"


def render(result: AuditResult, *, top: int = 10) -> str:
    """A plain-text report of an audit, the verdict first.

    Args:
        result: the audit.
        top: how many of the most harmful and most helpful nodes (and edges) to list.

    Returns:
        The report, lines joined by newlines.
    """
    d = result.to_dict()
    lines = _verdict_lines(d)
    lines += ["", *_graph_lines(d), *_metric_lines(d), *_group_lines(d)]
    if d["influence_summary"] is not None:
        lines += _influence_lines(d, top)
        if d.get("profile"):
            lines += profile_lines(d["profile"])
        if d.get("edges"):
            lines += edge_lines(d["edges"], result.edge_rows(), top=top)
        ref = d.get("refinement")
        if ref:
            lines.append(
                f"  refined: {ref['deletions']} deletions re-optimised (up to {ref['max_iter']} steps; "
                f"{ref['converged']} converged), {ref['seconds']:.1f} s"
            )
    if d["debiasing"]:
        lines += _debiasing_lines(d["debiasing"])
    lines += _check_lines(d)
    if d.get("warnings"):
        lines += ["", *(f"warning: {w}" for w in d["warnings"])]
    lines += ["", "seconds: " + ", ".join(f"{k} {s:.2f}" for k, s in d["timings"].items())]
    return "\n".join(lines)


def _verdict_lines(d: dict[str, Any]) -> list[str]:
    summary = d.get("summary")
    if not summary:
        return []
    return ["VERDICT", *(f"  {line}" for line in summary["text"].splitlines())]


def _graph_lines(d: dict[str, Any]) -> list[str]:
    g = d["graph"]
    sensitive = " & ".join(g.get("sensitive") or ["sens"])
    labels = g.get("group_labels") or g["group_names"]
    sizes = ", ".join(f"{name} {size}" for name, size in zip(labels, g["group_sizes"], strict=False))
    return [
        f"graph {g['name']}: {g['nodes']} nodes, {g['edges']} edges, {g['features']} features; train/val/test "
        f"{g['train']}/{g['val']}/{g['test']}",
        f"  sensitive attribute {sensitive}: {g['groups']} groups ({sizes} nodes); label {g.get('label', 'y')}",
        f"  node ids: {g.get('node_id_meaning', 'as in the graph')}",
        f"model {d['model']['arch']} ({d['model']['layers']} layer(s), {d['model']['parameters']} parameters); "
        + _stationarity_line(d["stationarity"]),
    ]


def _metric_lines(d: dict[str, Any]) -> list[str]:
    t = d["metrics"]["test"]
    lines = [
        "",
        "test metrics (%)   acc    AUC     F1    ΔSP    ΔEO   Γ_SP   Γ_EO",
        "  value         " + " ".join(_pct(t[k]) for k in _TEST_KEYS),
    ]
    ci = d["metrics"].get("intervals")
    if ci:
        level = f"{round(100 * ci['level'])}%"
        lines.append(f"  {level} lower".ljust(16) + " ".join(_pct(ci[k]["low"]) for k in _TEST_KEYS))
        lines.append(f"  {level} upper".ljust(16) + " ".join(_pct(ci[k]["high"]) for k in _TEST_KEYS))
        lines.append(
            "  resamples used".ljust(16) + " ".join(f"{ci['resamples'] - ci[k]['dropped']:6d}" for k in _TEST_KEYS)
        )
        lines.append("  (bounds of the percentile bootstrap interval over the test nodes)")
    for key, reason in (t.get("undefined") or {}).items():
        lines.append(f"  {key} undefined (–): {reason}")
    return lines


def _group_lines(d: dict[str, Any]) -> list[str]:
    """The per-group rates, then the worst pairs (more than two groups) and the groups kept out."""
    m = d["metrics"]
    groups = m.get("groups", [])
    lines = ["", "per group (%)".ljust(28) + "test nodes  pred. positive    TPR    acc"]
    for r in groups:
        lines.append(
            f"  {r['name'][:26]:<26} {r['size']:>8}        {_pct(r.get('positive_rate'))} {_pct(r.get('tpr'))} "
            f"{_pct(r.get('accuracy'))}"
        )
    names = {r["group"]: r.get("name", str(r["group"])) for r in groups}
    worst = m["test"].get("worst_pairs") or {}
    if len(names) > 2 and worst:
        for key, label in (("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma_sp", "Γ_SP"), ("gamma_eo", "Γ_EO")):
            w = worst.get(key)
            if w:
                a, b = w["groups"]
                lines.append(f"worst pair {label:<5} {100 * w['value']:6.2f}  ({names.get(a, a)} vs {names.get(b, b)})")
    out = [r for r in groups if not r.get("included", True)]
    if out:
        lines.append("kept out (below the minimum group size): " + ", ".join(f"{r['name']} ({r['size']})" for r in out))
    return lines


def _influence_lines(d: dict[str, Any], top: int) -> list[str]:
    inf = d["influence_summary"]
    labels = d["graph"].get("group_labels") or d["graph"]["group_names"]

    def node(r: dict[str, Any]) -> str:
        group = labels[r["group"]] if r["group"] < len(labels) else r["group"]
        return f"{r['node_id']} ({group}, ΔΓ {r['delta']:+.2e})"

    return [
        "",
        f"influence (ΔΓ if the training node were deleted; negative = harmful): {inf['harmful']} harmful, "
        f"{inf['helpful']} helpful of {inf['count']}; solver {inf['solver']}",
        "  most harmful, by node id: " + ", ".join(node(r) for r in d["top_harmful"][:top]),
        "  most helpful, by node id: " + ", ".join(node(r) for r in d["top_helpful"][:top]),
    ]


def _debiasing_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["", "debiasing (%)        deleted   acc    ΔSP    ΔEO   Γ_SP   Γ_EO"]
    first = rows[0]
    if first.get("retrain") == "adam":
        lines.append("  retrained with Adam alone (no polish); before: the unchanged graph retrained so")
    if first.get("recipe"):
        lines.append("  " + _recipe_line(first["recipe"]))
    lines.append("  before                   " + " ".join(_pct(first["before"][k]) for k in _AFTER_KEYS))
    for row in rows:
        flag = "  BACKFIRED" if row.get("backfired") else ""
        lines.append(
            f"  budget {row['budget']:<8} {row['deleted']:>6}   "
            + " ".join(_pct(row["after"][k]) for k in _AFTER_KEYS)
            + flag
        )
    lines += _backfires(rows)
    for row in rows:
        if row.get("against_random"):
            lines.append(f"  budget {row['budget']} against chance: {row['against_random']['verdict']}")
    if first.get("chance_rule"):
        lines.append(f"  {first['chance_rule']}")
    elif not any(row.get("against_random") for row in rows):
        lines.append(
            "  against chance: not checked, so retraining noise cannot be told from an effect "
            "(--debias-seeds 1,10,100 checks it)"
        )
    return lines


def _check_lines(d: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    v = d["validation"]
    if v is not None:
        truth = "proximal Bregman response" if v.get("mode") == "proximal" else "re-optimised model"
        lines += [
            "",
            f"self-check on {v['count']} random training nodes (estimate vs {truth}): "
            f"Pearson {v['pearson']:.4f}, Spearman {v['spearman']:.4f}"
            if v["pearson"] is not None
            else f"self-check on {v['count']} nodes: correlation undefined",
        ]
        gone = v.get("undefined_truth")
        if gone:
            lines.append(f"  {gone['count']} of them without a ground truth, left out: {gone['reason']}")
    st = d.get("stability")
    if st:
        lines += [
            "",
            f"top-{st['k']} harmful set across seeds {', '.join(map(str, st['seeds']))}: Jaccard "
            f"{st['all']['jaccard']:.2f} over all ({st['all']['intersection']} in every set), "
            f"mean pairwise {st['mean_pairwise_jaccard']:.2f}",
        ]
    return lines


def _stationarity_line(record: dict[str, Any]) -> str:
    """How stationary the audited weights are, in a few words."""
    norm = record.get("grad_norm")
    shown = "gradient norm " + ("–" if norm is None else f"{norm:.2e}")
    state = record.get("stationary")
    if state is False:
        return f"{shown}: not a stationary point, audited as given (estimates: the proximal Bregman response)"
    if state == "kinks":
        return f"{shown}: a minimum on ReLU kinks"
    return shown + ("" if state is None else ": a stationary point")


def _backfires(rows: list[dict[str, Any]]) -> list[str]:
    """A line per budget whose deletion raised a bias metric (``backfired``), with the metric before and after."""
    lines = []
    for row in rows:
        if row.get("backfired"):
            rose = ", ".join(
                f"{_BIAS_NAMES[k]} {_pct(row['before'][k]).strip()} → {_pct(row['after'][k]).strip()}"
                for k in row["backfired"]
            )
            lines.append(f"  budget {row['budget']} BACKFIRED: the deletion raised {rose} (%)")
    return lines


def _recipe_line(recipe: dict[str, Any]) -> str:
    """The debiasing's retraining recipe in a line."""
    stop = f", early stopping after {recipe['patience']} epochs" if recipe.get("patience") else ""
    polish = ", then the polish" if recipe.get("polish") else ""
    return (
        f"retrained from scratch: {recipe.get('optimizer', 'adam')} lr {recipe.get('lr')}, weight decay "
        f"{recipe.get('weight_decay')}, up to {recipe.get('epochs')} epochs{stop}{polish}"
    )


def render_supplied(record: dict[str, Any]) -> str:
    """What was done to a supplied model before its audit, in a few lines."""
    lines = ["supplied model:"]
    if "pyg" in record:
        pyg = record["pyg"]
        lines.append(
            f"  read from a PyG {pyg['class']}: largest relative logit difference {pyg['max_logit_difference']:.1e} "
            f"on {pyg['nodes']} nodes"
        )
    if not record["polished_by_service"]:
        lines.append(f"  audited as given (gradient norm of its training objective {record['grad_norm']:.2e})")
        return "\n".join(lines)
    lines.append(
        f"  audited polished (--reference polished): gradient norm {record['grad_norm_supplied']:.2e} as given -> "
        f"{record['grad_norm']:.2e}"
    )
    comparison = record.get("comparison")
    if comparison:
        lines.append(f"  {'':<10} {'as given':>10} {'polished':>10}")
        for key, name in (("accuracy", "accuracy"), ("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma", "Γ")):
            given, polished = comparison["as_given"].get(key), comparison["polished"].get(key)
            lines.append(f"  {name:<10} {_shown(given):>10} {_shown(polished):>10}")
        share = comparison.get("predictions_differ")
        if share is not None:
            lines.append(f"  test predictions that differ: {100 * share:.1f}% of {comparison['test_nodes']}")
    return "\n".join(lines)


def _shown(value: Any) -> str:
    """A metric for the side-by-side table (null: "—")."""
    return "—" if value is None else f"{float(value):.4f}"
