"""One Adam epoch over neighbour-sampled mini-batches, and the validation loss on the validation nodes' exact
computation graph (what :func:`bind_core.training.fit.train` runs when ``TrainConfig.batch_size > 0``).

An epoch shuffles the training nodes (from a ``torch.Generator`` seeded with the training seed, which also draws
every neighbour sample: the same seed gives the same batches), cuts them into batches of ``batch_size``, samples
each batch's computation graph (:class:`~bind_core.training.sampling.NeighbourSampler`) and takes one Adam step on
the batch's mean loss, an unbiased estimate of the full objective's gradient when the fan-outs cover every neighbour
(and of the sampled model's otherwise). The validation loss, which picks the best epoch, is exact: the validation
nodes' computation graph with every neighbour, built once and reused every epoch. Where the validation set is larger
than :data:`VALIDATION_NODES`, that many of its nodes, drawn once (seeded by the training seed, from a generator of
their own so that the batches stay the same), stand for it: an epoch then costs what its batches cost rather than a
pass over most of the graph (a 10⁶-node graph's 250,000 validation nodes read nearly all of it, 3.5 s an epoch
against the batches' fraction of a second), and the mean loss of 10,000 nodes differs from the whole set's by about
1% of the loss's spread across nodes. The choice only moves the epoch the polish starts from; the polish is exact.

With one batch holding every training node and every neighbour sampled, an epoch is the full-batch epoch (to
round-off: the sums run in another order), except for dropout: its masks are drawn over the batch's rows rather
than over the whole graph's, so they agree in distribution only (with dropout 0 the two are equal).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from bind_core.data.graph import Graph
from bind_core.models.gnn import GNN, node_losses
from bind_core.models.propagation import GraphInputs
from bind_core.training.sampling import NeighbourSampler, SampledBatch

VALIDATION_NODES = 10_000
"""The most validation nodes a mini-batch epoch's validation loss reads (a seeded subset of a larger set)."""


def validation_nodes(val_idx: Tensor, seed: int, limit: int | None = None) -> Tensor:
    """``val_idx`` itself when it holds at most ``limit`` (default :data:`VALIDATION_NODES`) nodes, else ``limit`` of
    them drawn with ``seed`` (in ``val_idx``'s order)."""
    limit = VALIDATION_NODES if limit is None else limit
    if val_idx.numel() <= limit:
        return val_idx
    pick = torch.randperm(val_idx.numel(), generator=torch.Generator().manual_seed(seed))[:limit]
    return val_idx[pick.sort().values]


class MiniBatchEpochs:
    """Mini-batch Adam epochs of ``module`` on ``graph`` (see the module doc).

    Args:
        module: a GCN, GIN or SAGE :class:`~bind_core.models.gnn.GNN` (any number of layers).
        inputs: the graph's prepared inputs (:meth:`GNN.prepare`), on the module's device and dtype.
        graph: the graph (training and validation nodes, labels).
        optimizer: the optimiser over ``module``'s parameters.
        batch_size: training nodes per batch (the last batch of an epoch may be smaller).
        fan_out: neighbours per hop, the seeds' first; ``-1`` every neighbour (see :mod:`.sampling`).
        seed: seeds the generator of the shuffles and the samples.
    """

    def __init__(
        self,
        module: GNN,
        inputs: GraphInputs,
        graph: Graph,
        optimizer: torch.optim.Optimizer,
        *,
        batch_size: int,
        fan_out: Sequence[int],
        seed: int,
    ) -> None:
        self.module, self.inputs, self.optimizer = module, inputs, optimizer
        self.device = inputs.x.device
        self.batch_size = batch_size
        self.train_idx = graph.train_idx
        self.y = graph.y.to(self.device)
        self.generator = torch.Generator().manual_seed(seed)
        self.sampler = NeighbourSampler(
            graph,
            module.config.arch,
            fan_out,
            layers=module.config.layers,
            dtype=inputs.x.dtype,
            device=self.device,
            generator=self.generator,
        )
        self.fan_out = self.sampler.fan_out
        self.batches_per_epoch = -(-int(graph.train_idx.numel()) // batch_size)
        self.validation_nodes = validation_nodes(graph.val_idx, seed)
        validation = self.sampler.sample(self.validation_nodes, exact=True)
        self._val_rows = self._rows(validation)
        self._val_blocks = validation.blocks
        self._y_val = self.y[validation.seeds.to(self.device)]

    def step(self) -> None:
        """One epoch: an Adam step per batch of the shuffled training nodes."""
        for batch in self.sampler.batches(self.train_idx, self.batch_size):
            self.optimizer.zero_grad(set_to_none=True)
            logits = self.module.forward_blocks(self._rows(batch), batch.blocks)
            loss = node_losses(logits, self.y[batch.seeds.to(self.device)]).mean()
            loss.backward()  # type: ignore[no-untyped-call]
            self.optimizer.step()

    def validation_loss(self) -> Tensor:
        """The mean loss of the validation nodes (exact: every neighbour; at most :data:`VALIDATION_NODES` of them), in
        the module's current mode."""
        return node_losses(self.module.forward_blocks(self._val_rows, self._val_blocks), self._y_val).mean()

    def _rows(self, batch: SampledBatch) -> Tensor:
        """The rows the batch's first layer reads: aggregated features, or raw ones when that layer is sampled."""
        source = self.inputs.x_prop if batch.aggregated else self.inputs.x
        if source is None:
            raise ValueError("mini-batch training needs a GCN, GIN or SAGE model's aggregated features")
        return source[batch.input_nodes.to(self.device)]
