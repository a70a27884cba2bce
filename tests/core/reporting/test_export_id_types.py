"""The exports' id columns as docs/API.md gives them: ``node_id`` is ``int64`` in Parquet and a number in the CSV,
or ``string`` and a text cell (formula-escaped) where the user's ids are text."""

from __future__ import annotations

import io

import pyarrow.parquet as pq

from bind_core.pipeline.results import InfluenceRow
from bind_core.reporting import influence_csv, influence_parquet


def _rows(ids: list[int | str]) -> list[InfluenceRow]:
    return [
        InfluenceRow(position=i, node_index=i, node_id=n, group=0, label=1, delta=-0.5, delta_sp=0.1, delta_eo=0.2)
        for i, n in enumerate(ids)
    ]


def test_numeric_ids_are_int64_and_text_ids_strings() -> None:
    numeric = pq.read_table(io.BytesIO(influence_parquet(_rows([7, 8]))))
    assert str(numeric.schema.field("node_id").type) == "int64"
    text = pq.read_table(io.BytesIO(influence_parquet(_rows(["ann", "=cmd"]))))
    assert str(text.schema.field("node_id").type) == "string"
    assert text.column("node_id").to_pylist() == ["ann", "=cmd"]  # Parquet needs no escaping
    lines = influence_csv(_rows(["ann", "=cmd"])).decode().splitlines()
    assert lines[1].split(",")[2] == "ann" and lines[2].split(",")[2] == "'=cmd"
