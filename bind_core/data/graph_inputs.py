"""Reading :meth:`~bind_core.data.graph.Graph.build`'s arguments: arrays of any kind as tensors, the fields' lengths,
a split given as indices or as a boolean mask, and an edge list made undirected, without self-loops or repeats."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from bind_core.errors import GraphValidationError

ArrayLike = Tensor | np.ndarray | Sequence[Any]
"""What :meth:`~bind_core.data.graph.Graph.build` reads as an array: a tensor, a numpy array or a sequence."""


def example(values: object) -> object:
    """The first item of ``values`` (a sequence) in a list, for an example call; ``values`` itself otherwise."""
    if isinstance(values, str):
        return [values]
    try:
        return [next(iter(values))]  # type: ignore[call-overload]
    except (TypeError, StopIteration):
        return values


def same_length(fields: dict[str, Tensor]) -> None:
    """``x``, ``y``, ``sens`` (and ``node_ids``) have one entry per node: the same length, else an error naming the
    one that differs from the others."""
    sizes = {name: int(t.shape[0]) if t.ndim >= 1 else 0 for name, t in fields.items()}
    if len(set(sizes.values())) <= 1:
        return
    counts = {size: sum(1 for v in sizes.values() if v == size) for size in sizes.values()}
    common = max(counts, key=lambda size: (counts[size], sizes["x"] == size))
    odd = next(name for name, size in sizes.items() if size != common)
    listed = ", ".join(f"{name} {size}" for name, size in sizes.items())
    raise GraphValidationError(
        odd,
        f"has {sizes[odd]} entries where the others have {common} ({listed}): x, y and sens need one row per node",
    )


def split_index(value: ArrayLike, name: str, n: int) -> Tensor:
    """A split's node indices from ``value``: indices, or a boolean mask over the ``n`` nodes (its ``True``
    entries). A 0/1 integer mask is refused with what to pass instead."""
    if _is_bool(value):
        mask = as_tensor(value, torch.long, name).reshape(-1)
        if mask.numel() != n:
            raise GraphValidationError(
                name, f"a boolean mask needs one entry per node ({n}), got {mask.numel()}; or pass node indices"
            )
        return mask.nonzero().flatten()
    out = as_tensor(value, torch.long, name)
    if n > 2 and out.ndim == 1 and out.numel() == n and bool(((out == 0) | (out == 1)).all()):
        raise GraphValidationError(
            name,
            f"looks like a 0/1 mask over the {n} nodes, not node indices: pass the indices (mask.nonzero().flatten()) "
            "or a boolean mask (mask.bool())",
        )
    return out


def _is_bool(value: ArrayLike) -> bool:
    """Whether ``value`` is a boolean array (a mask)."""
    if isinstance(value, Tensor):
        return value.dtype == torch.bool
    try:
        return bool(np.asarray(value).dtype == np.bool_)
    except (TypeError, ValueError):
        return False


def as_tensor(value: ArrayLike, dtype: torch.dtype, name: str) -> Tensor:
    try:
        if isinstance(value, Tensor):
            t = value.detach().cpu()
        else:
            arr = np.asarray(value)
            if arr.dtype == object:
                raise GraphValidationError(name, "object arrays are not accepted")
            arr = np.ascontiguousarray(arr)
            t = torch.from_numpy(arr if arr.flags.writeable else arr.copy())
    except (TypeError, ValueError) as exc:
        if isinstance(exc, GraphValidationError):
            raise
        raise GraphValidationError(name, f"cannot be read as an array ({exc})") from exc
    if (
        dtype == torch.long
        and t.is_floating_point()
        and (not bool(torch.isfinite(t).all()) or not bool((t == t.round()).all()))
    ):
        raise GraphValidationError(name, "expected integers, got non-integral values")
    if t.dtype == torch.bool and dtype == torch.long:
        t = t.long()
    return t.to(dtype).contiguous()


def clean_edges(
    edges: ArrayLike, n: int, self_loops: Literal["drop", "error"], duplicates: Literal["merge", "error"]
) -> Tensor:
    """The undirected ``edge_index`` of ``edges`` (``[2, E]`` or ``[E, 2]`` pairs among ``n`` nodes): checked,
    self-loops dropped or refused, repeated edges merged or refused (see :meth:`Graph.build`)."""
    et = as_tensor(edges, torch.long, "edge_index")
    if et.ndim == 2 and et.shape[0] != 2 and et.shape[1] == 2:
        et = et.t()
    if et.ndim == 1 and et.numel() == 0:
        et = et.reshape(2, 0)
    if et.ndim != 2 or et.shape[0] != 2:
        raise GraphValidationError("edge_index", f"expected shape [2, E] or [E, 2], got {list(et.shape)}")
    if et.numel() and (int(et.min()) < 0 or int(et.max()) >= n):
        bad = int(et.max()) if int(et.max()) >= n else int(et.min())
        raise GraphValidationError("edge_index", f"node index {bad} out of range for {n} nodes")
    loops = et[0] == et[1]
    if bool(loops.any()):
        if self_loops == "error":
            v = int(et[0, loops][0])
            raise GraphValidationError("edge_index", f"self-loop on node {v} ({int(loops.sum())} in all)")
        et = et[:, ~loops]
    und = torch.stack([torch.minimum(et[0], et[1]), torch.maximum(et[0], et[1])])
    keys = und[0] * max(n, 1) + und[1]
    uniq = torch.unique(keys)
    if uniq.numel() != keys.numel() and duplicates == "error":
        raise GraphValidationError(
            "edge_index", f"{keys.numel() - uniq.numel()} duplicate edges (an edge listed twice)"
        )
    return _undirected_from_keys(uniq, n)


def _undirected_from_keys(keys: Tensor, n: int) -> Tensor:
    """Both directions of each undirected edge ``u*n+v`` (u<v), sorted by (source, target)."""
    u, v = keys // max(n, 1), keys % max(n, 1)
    src = torch.cat([u, v])
    dst = torch.cat([v, u])
    order = torch.argsort(src * max(n, 1) + dst)
    return torch.stack([src[order], dst[order]])
