"""Anderson mixing of the step estimate's chord steps: fewer steps where the frozen curvature misjudges one direction.

The chord steps (:meth:`bind_core.influence.step.Stepper._chord_steps`) iterate ``θ ← θ − d(θ)``, ``d = (H + μI)⁻¹·∇F``
with the curvature ``H`` frozen at ``θ̂``. Where the objective's curvature at a deletion's optimum differs from the
frozen one, they converge linearly: on a smooth two-layer model as Adam leaves it, the curvature along one direction
is ~1.8× the frozen one, every step overshoots there by 0.8 of the distance, and the iterates oscillate about the
optimum, the gradient falling by ~0.8 a step, so 20 steps do not settle (docs/METHOD.md, "Anderson-mixed chord
steps").

Anderson mixing (type II, Walker & Ni, SIAM J. Numer. Anal. 2011) learns the misjudged directions from the last
:data:`WINDOW` steps: with ``ΔX`` the last steps' moves and ``ΔD`` the changes of ``d`` over them, it takes

    s = d + (ΔX − ΔD)·γ,    γ = argmin_γ ‖d − ΔD·γ‖²,

and moves ``θ ← θ − s``; on a quadratic objective this is GMRES on the chord's preconditioned system, exact in one
step along a direction it has seen twice (the 1-D example: ``d = 1.8·θ`` reaches 0 at the second step). A mixed step
that does not descend ``F`` (``∇F·s ≤ 0``) is replaced by ``d`` and the history cleared; the chord's Armijo halvings
apply to ``s`` as they did to ``d``. The first step has no history: it is the damped Newton step itself, unchanged.

The state holds a batch of deletions (``[B, p]`` weights) so that the sequential path (``B = 1``) and the batched one
(:mod:`bind_core.influence.batched`) mix with the same arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

WINDOW = 3
"""Past steps the mixing remembers (the last ``WINDOW`` moves and changes of the chord direction)."""

RIDGE = 1e-12
"""The least-squares problem for ``γ`` is solved with this ridge, relative to the largest diagonal entry of its Gram
matrix ``ΔDᵀΔD``: two past directions nearly alike (near convergence, at rounding) must not blow ``γ`` up."""


@dataclass
class Mixing:
    """Each member's last :data:`WINDOW` moves and chord-direction changes (:meth:`of` makes an empty one)."""

    moves: Tensor
    """``[B, WINDOW, p]``: the last moves ``θ_{k+1} − θ_k``, newest last (zeros where there is no history)."""
    changes: Tensor
    """``[B, WINDOW, p]``: the changes ``d_{k+1} − d_k`` over those moves."""
    count: Tensor
    """``[B]``: how many of the slots hold history."""
    last_at: Tensor
    """``[B, p]``: the weights where each member's last chord direction was taken."""
    last_direction: Tensor
    """``[B, p]``: that direction (meaningless while :attr:`started` is false)."""
    started: Tensor
    """``[B]``: whether a member has a last direction."""

    @classmethod
    def of(cls, size: int, p: int, like: Tensor) -> Mixing:
        """No history, for ``size`` members with ``p`` weights (``like``'s dtype and device)."""
        zeros = torch.zeros(size, WINDOW, p, dtype=like.dtype, device=like.device)
        return cls(
            moves=zeros,
            changes=zeros.clone(),
            count=torch.zeros(size, dtype=torch.long, device=like.device),
            last_at=torch.zeros(size, p, dtype=like.dtype, device=like.device),
            last_direction=torch.zeros(size, p, dtype=like.dtype, device=like.device),
            started=torch.zeros(size, dtype=torch.bool, device=like.device),
        )

    def step(self, members: Tensor, at: Tensor, direction: Tensor, grad: Tensor) -> tuple[Tensor, Tensor]:
        """The mixed steps of ``members`` (``[k]`` indices) at their weights ``at`` (``[k, p]``), where the chord
        directions are ``direction`` and the gradients ``grad``: records the move and direction change since each
        member's last direction, then mixes. Returns ``(s, slope)``: the steps to subtract and ``∇F·s`` (> 0), each
        member's chord direction itself where mixing does not descend or it has no history."""
        self._record(members, at, direction)
        count = self.count[members]
        step = direction.clone()
        mixed = count > 0
        if bool(mixed.any()):
            rows = members[mixed]
            moves, changes, d = self.moves[rows], self.changes[rows], direction[mixed]
            gamma = _coefficients(changes, d, count[mixed])
            step[mixed] = d + torch.einsum("bwp,bw->bp", moves - changes, gamma)
        slope = (grad * step).sum(dim=1)
        bad = mixed & ~(slope > 0)  # not a descent direction: the chord's own, the history cleared
        if bool(bad.any()):
            step[bad], slope[bad] = direction[bad], (grad[bad] * direction[bad]).sum(dim=1)
            self.count[members[bad]] = 0
        return step, slope

    def _record(self, members: Tensor, at: Tensor, direction: Tensor) -> None:
        """Push each started member's move and direction change since its last direction; remember this one."""
        started = self.started[members]
        if bool(started.any()):
            rows = members[started]
            move = at[started] - self.last_at[rows]
            change = direction[started] - self.last_direction[rows]
            self.moves[rows] = torch.cat([self.moves[rows, 1:], move.unsqueeze(1)], dim=1)
            self.changes[rows] = torch.cat([self.changes[rows, 1:], change.unsqueeze(1)], dim=1)
            self.count[rows] = (self.count[rows] + 1).clamp(max=WINDOW)
        self.last_at[members], self.last_direction[members] = at, direction
        self.started[members] = True


def _coefficients(changes: Tensor, d: Tensor, count: Tensor) -> Tensor:
    """``γ = argmin ‖d − ΔDᵀγ‖²`` per member over its last ``count`` slots (the newest, at the end), by the normal
    equations with :data:`RIDGE`; the older, empty slots get ``γ = 0``. ``[k, WINDOW]``."""
    gram = torch.einsum("bwp,bvp->bwv", changes, changes)
    rhs = torch.einsum("bwp,bp->bw", changes, d)
    slots = torch.arange(WINDOW, device=count.device)
    empty = slots.unsqueeze(0) < (WINDOW - count).unsqueeze(1)  # [k, WINDOW]: the slots before the history
    eye = torch.eye(WINDOW, dtype=gram.dtype, device=gram.device)
    scale = gram.diagonal(dim1=1, dim2=2).amax(dim=1).clamp(min=torch.finfo(gram.dtype).tiny)
    gram = gram * ~(empty.unsqueeze(1) | empty.unsqueeze(2)) + eye * empty.unsqueeze(2)
    gram = gram + RIDGE * scale[:, None, None] * eye
    rhs = rhs.masked_fill(empty, 0.0)
    gamma: Tensor = torch.linalg.solve(gram, rhs)
    return gamma
