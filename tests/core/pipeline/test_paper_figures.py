"""The paper's one-layer figures on the full datasets (slow: left out by default, `scripts/check -m slow`).

The audit of the paper's GCN (its recipe: Adam, then the polish to a stationary point; seed 10) on Income and
Recidivism, with the self-check on 50 random training nodes against re-optimisation after deleting each (the
benchmark's number: ``bench/bench_influence.py --parts rq2``, docs/RESULTS.md, measures 0.9995 and 0.9992). The
threshold, 0.999, is the goal for these models; a wrong sign, a missing non-i.i.d. term or a stale Hessian drops it
far below. On 30 nodes Recidivism gave 0.9989: the sample size is part of the figure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import bind_core as bc


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["income", "recidivism"])
def test_the_paper_gcn_is_attributed_as_the_paper_reports(data_root: Path, dataset: str) -> None:
    graph = bc.load_dataset(dataset, data_root)
    config = bc.AuditConfig(
        stages=("training", "metrics", "influence", "validation"), validation_sample=50, bootstrap=0
    )
    result = bc.run_audit(graph, config)
    validation = result.typed().validation
    assert validation is not None and validation.count == 50
    assert validation.pearson is not None and validation.pearson >= 0.999, validation.pearson
    assert result.typed().metrics is not None
