"""``bind_core.autograd.apply``: ``Function.apply`` without the per-call signature binding outside ``torch.func``
transforms (same values and gradients), and ``Function.apply`` itself inside them."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch

from bind_core.autograd import apply
from bind_core.data.sparse import _SpMM, csr_parts


def _operands() -> tuple[torch.Tensor, Any, Any, tuple[int, int]]:
    gen = torch.Generator().manual_seed(0)
    row = torch.tensor([0, 0, 1, 2, 2, 3])
    col = torch.tensor([1, 3, 2, 0, 3, 1])
    weight = torch.rand(6, generator=gen, dtype=torch.float64)
    parts, transposed = csr_parts(row, col, weight, 4), csr_parts(col, row, weight, 4)
    return torch.rand(4, 3, generator=gen, dtype=torch.float64), parts, transposed, (4, 4)


def test_outside_a_transform_no_signature_is_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    x, parts, transposed, shape = _operands()
    leaf = x.clone().requires_grad_(True)
    expected = _SpMM.apply(leaf, parts, transposed, shape)  # type: ignore[no-untyped-call]
    (grad_expected,) = torch.autograd.grad(expected.square().sum(), leaf)
    monkeypatch.setattr(inspect, "signature", lambda *a, **k: pytest.fail("bound the signature"))
    got = apply(_SpMM, leaf, parts, transposed, shape)
    (grad_got,) = torch.autograd.grad(got.square().sum(), leaf)
    assert torch.equal(got, expected) and torch.equal(grad_got, grad_expected)


def test_inside_a_transform_function_apply_runs() -> None:
    x, parts, transposed, shape = _operands()
    through = torch.func.grad(lambda v: apply(_SpMM, v, parts, transposed, shape).square().sum())(x)
    direct = torch.func.grad(lambda v: _SpMM.apply(v, parts, transposed, shape).square().sum())(x)  # type: ignore[no-untyped-call]
    assert torch.equal(through, direct)
    batched = torch.vmap(lambda v: apply(_SpMM, v, parts, transposed, shape))(torch.stack([x, 2 * x]))
    assert torch.allclose(batched[1], 2 * batched[0], rtol=0, atol=1e-15)
