"""A dataset audit or schedule the server cannot run is refused with a 422 that says where the server looks for the
datasets' files (``BIND_DATA_ROOT``), and a present dataset is named canonically."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.errors import ValidationProblem
from app.core.settings import Settings
from app.datasets.lookup import present_dataset

SHARED = Path(__file__).resolve().parents[4] / "shared" / "datasets"


@pytest.mark.parametrize(
    ("name", "root", "says"),
    [
        ("income", None, "this server has no data root: start the API and its workers with BIND_DATA_ROOT set"),
        ("income", "empty", "its files are not under the server's data root (BIND_DATA_ROOT)"),
        ("no-such-dataset", "empty", "valid names: income"),
    ],
)
def test_a_dataset_the_server_cannot_run_says_why(name: str, root: str | None, says: str, tmp_path: Path) -> None:
    settings = Settings(data_root=None if root is None else tmp_path)
    with pytest.raises(ValidationProblem) as caught:
        present_dataset(name, settings)
    problem = caught.value
    assert problem.status == 422 and says in str(problem.detail), problem.detail
    assert [dict(e) for e in problem.errors] == [
        {"field": "dataset", "message": str(problem.detail)[len(f"dataset {name!r}: ") : -1]}
    ]


@pytest.mark.skipif(not (SHARED / "income").is_dir(), reason="the paper's datasets are not on this machine")
def test_a_present_dataset_is_named_canonically() -> None:
    assert present_dataset("Income", Settings(data_root=SHARED)) == "income"
