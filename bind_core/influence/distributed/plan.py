"""The shared and the per-node halves of an influence estimate, so that the second can be split over workers.

An estimate has a part done once for the whole training set (the gradient of Γ, the Hessian solve
``s = H⁻¹·∇Γ``, and ``a_j = ∇ℓ_jᵀ·s`` for every training node ``j``: the :class:`InfluencePlan`) and a part
done per training node ``v`` (the i.i.d., non-i.i.d. and direct terms of ``v``: an :class:`InfluenceChunk` for
a contiguous range of positions in ``train_idx``). Chunks are independent given the plan, so they can run in
any order, anywhere; :func:`bind_core.influence.distributed.combine` puts them together. Both halves serialise to
safetensors bytes plus JSON-safe metadata (no pickle), to travel between processes or machines.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import Tensor

from bind_core.codec import decode, encode
from bind_core.errors import ConfigError
from bind_core.influence.solvers import SolveInfo

PLAN_FORMAT = "bind-audit/influence-plan@1"
CHUNK_FORMAT = "bind-audit/influence-chunk@1"

M = TypeVar("M")


@dataclass(kw_only=True)
class _SolveMeta:
    """The Hessian solve's record in a plan's metadata."""

    solver: str
    seconds: float
    details: dict[str, Any]


@dataclass(kw_only=True)
class _PlanMeta:
    """A plan's metadata (its settings; the tensors travel beside it)."""

    format: str
    lam: float
    grad_norm: float
    solve: _SolveMeta
    non_iid: bool
    direct: bool
    direct_exact: bool
    groups: list[int] | None
    timings: dict[str, float]


@dataclass(kw_only=True)
class _ChunkMeta:
    """A chunk's metadata."""

    format: str
    start: int
    stop: int
    seconds: float


@dataclass
class InfluencePlan:
    """What every chunk needs: ``s = H⁻¹·[∇Γ_SP, ∇Γ_EO]`` (``[p, 2]``) and ``a = [∇ℓ_jᵀ·s]_j`` (``[m, 2]``).

    ``theta`` (``[p]``, float64) is the parameter vector the plan linearises around; a chunk checks that the
    model it is given has exactly these weights.
    """

    lam: float
    theta: Tensor
    s: Tensor
    a: Tensor
    gamma: Tensor
    grad_norm: float
    solve: SolveInfo
    non_iid: bool = True
    direct: bool = True
    direct_exact: bool = False
    groups: list[int] | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def num_train(self) -> int:
        return int(self.a.shape[0])

    def to_bytes(self) -> bytes:
        """Safetensors bytes; the settings travel in its metadata (strings only, no pickle)."""
        solve = _SolveMeta(solver=self.solve.solver, seconds=self.solve.seconds, details=self.solve.details)
        meta = _PlanMeta(
            format=PLAN_FORMAT,
            lam=self.lam,
            grad_norm=self.grad_norm,
            solve=solve,
            non_iid=self.non_iid,
            direct=self.direct,
            direct_exact=self.direct_exact,
            groups=self.groups,
            timings=self.timings,
        )
        tensors = {"theta": self.theta, "s": self.s, "a": self.a, "gamma": self.gamma}
        return st_save({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, {"bind": _json(meta)})

    @classmethod
    def from_bytes(cls, data: bytes) -> InfluencePlan:
        tensors, meta = _load(data, PLAN_FORMAT, _PlanMeta)
        return cls(
            lam=float(meta.lam),
            theta=tensors["theta"],
            s=tensors["s"],
            a=tensors["a"],
            gamma=tensors["gamma"],
            grad_norm=float(meta.grad_norm),
            solve=SolveInfo(meta.solve.solver, float(meta.solve.seconds), dict(meta.solve.details)),
            non_iid=meta.non_iid,
            direct=meta.direct,
            direct_exact=meta.direct_exact,
            groups=meta.groups,
            timings={k: float(v) for k, v in meta.timings.items()},
        )


@dataclass
class InfluenceChunk:
    """The per-node terms for training positions ``start..stop-1``: each ``[stop − start, 2]`` (SP, EO)."""

    start: int
    stop: int
    iid: Tensor
    non_iid: Tensor
    direct: Tensor
    seconds: float = 0.0

    def to_bytes(self) -> bytes:
        meta = _ChunkMeta(format=CHUNK_FORMAT, start=self.start, stop=self.stop, seconds=self.seconds)
        tensors = {"iid": self.iid, "non_iid": self.non_iid, "direct": self.direct}
        return st_save({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, {"bind": _json(meta)})

    @classmethod
    def from_bytes(cls, data: bytes) -> InfluenceChunk:
        tensors, meta = _load(data, CHUNK_FORMAT, _ChunkMeta)
        return cls(meta.start, meta.stop, tensors["iid"], tensors["non_iid"], tensors["direct"], float(meta.seconds))


def chunk_bounds(num_train: int, chunks: int | None = None, *, chunk_size: int | None = None) -> list[tuple[int, int]]:
    """Contiguous ``(start, stop)`` ranges covering ``0..num_train-1``: ``chunks`` of them, or of ``chunk_size``."""
    if num_train < 0:
        raise ConfigError("num_train must be >= 0")
    if (chunks is None) == (chunk_size is None):
        raise ConfigError("give exactly one of chunks and chunk_size")
    if chunks is not None:
        if chunks < 1:
            raise ConfigError(f"chunks: {chunks!r} must be >= 1")
        chunks = min(chunks, max(num_train, 1))
        edges = [round(i * num_train / chunks) for i in range(chunks + 1)]
    else:
        assert chunk_size is not None
        if chunk_size < 1:
            raise ConfigError(f"chunk_size: {chunk_size!r} must be >= 1")
        edges = [*range(0, num_train, chunk_size), num_train]
    return [(a, b) for a, b in itertools.pairwise(edges) if b > a] or [(0, 0)]


def _load(data: bytes, expected: str, kind: type[M]) -> tuple[dict[str, Tensor], M]:
    """The tensors of a plan's or chunk's bytes and their metadata, read as ``kind``."""
    try:
        tensors = st_load(data)
        meta = _metadata(data)
    except ConfigError:
        raise
    except Exception as exc:  # safetensors and json raise their own error types for malformed bytes
        raise ConfigError(f"not a safetensors {expected} document: {exc}") from exc
    if meta.get("format") != expected:
        raise ConfigError(f"expected format {expected!r}, got {meta.get('format')!r}")
    return tensors, decode(kind, dict(meta), "bind metadata")


def _metadata(data: bytes) -> Mapping[str, object]:
    """The JSON under the ``bind`` key of a safetensors header."""
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    raw = header.get("__metadata__", {}).get("bind")
    if raw is None:
        raise ConfigError("safetensors document without bind metadata")
    meta = json.loads(raw)
    if not isinstance(meta, dict):
        raise ConfigError("bind metadata is not an object")
    return meta


def _json(meta: object) -> str:
    """A metadata record as the JSON a safetensors header carries."""
    return json.dumps(encode(meta))


def stack_chunks(chunks: list[InfluenceChunk], num_train: int) -> dict[str, Tensor]:
    """The chunks' terms laid out over all ``num_train`` positions; every position must be covered once."""
    covered = torch.zeros(num_train, dtype=torch.int64)
    out = {k: torch.zeros(num_train, 2, dtype=torch.float64) for k in ("iid", "non_iid", "direct")}
    for c in chunks:
        if not 0 <= c.start <= c.stop <= num_train:
            raise ConfigError(f"chunk {c.start}..{c.stop} is outside 0..{num_train}")
        covered[c.start : c.stop] += 1
        for key in out:
            out[key][c.start : c.stop] = getattr(c, key).to("cpu", torch.float64)
    if num_train and not bool((covered == 1).all()):
        missing = int((covered == 0).sum())
        twice = int((covered > 1).sum())
        raise ConfigError(f"chunks cover the training set badly: {missing} positions missing, {twice} repeated")
    return out
