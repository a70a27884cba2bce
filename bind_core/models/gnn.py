"""GNN node classifiers built from PyTorch Geometric layers: GCN, GIN, GraphSAGE and GAT.

Every model is ``L`` message-passing layers with an activation and dropout *between* them, then a linear head on the
last layer's output, as in the paper's GCN (one GCN layer with 16 hidden units, then a linear layer, with no
activation or dropout in between: the reference code's one-layer GCN applies none). Binary labels use one output logit
(sigmoid / binary cross-entropy, as the paper's code); ``C > 2`` classes use ``C`` logits (softmax).

One-layer GCN, GIN and GraphSAGE aggregate linearly and without parameters before any weight is applied
(``GCNConv(X) = Â·X·W + b``; ``GINConv(X) = MLP(X + A·X)``; mean-``SAGEConv(X) = mean_N(X)·W_l + X·W_r``), so
:meth:`GNN.prepare` computes the aggregated rows ``Z`` once per graph (``Â·X``; ``X + A·X``; ``[mean_N(X), X]``),
after which the model is an MLP on the rows of ``Z``: training touches only the training rows, and influence
estimation recomputes single rows of ``Z`` for a deleted node. GAT's attention and deeper models are not.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GCNConv, GINConv, SAGEConv

from bind_core.config import DictConfig
from bind_core.data.graph import Graph
from bind_core.data.ladder import ladder
from bind_core.data.sparse import Adjacency, spmm
from bind_core.errors import ConfigError, ModelDoesNotFitError, NonFiniteError
from bind_core.models.activations import ACTIVATION_MODULES, activation_fn
from bind_core.models.fits import classes_problem, features_problem, require_fit
from bind_core.models.gat import SmoothGATConv, SmoothGATv2Conv, SmoothScores
from bind_core.models.layers import aggregate_first, dropout, sage_first_layer, sage_output
from bind_core.models.norms import NORMS, Norm, is_normalisation, layer_norm_at, make_norm, norm_act, normalised
from bind_core.models.propagation import (
    GraphInputs,
    aggregate_features,
    gcn_norm,
    message_adjacency,
    prepared_inputs,
    propagate,
    with_self_loops,
)

ARCHS = ("gcn", "gin", "sage", "gat")
ACTIVATIONS = ("gelu", "relu", "tanh", "elu", "identity")
NON_SMOOTH_ACTIVATIONS = ("relu", "elu")
"""Activations whose second derivative jumps at 0 (ReLU's first too); see :mod:`bind_core.pipeline.caveats`."""
ATTENTION_SCORES = ("smooth", "leaky_relu")


@dataclass(frozen=True)
class ModelConfig(DictConfig):
    """Architecture settings (defaults: the paper's GCN).

    Args:
        arch: ``"gcn"``, ``"gin"``, ``"sage"`` or ``"gat"``.
        layers: number of message-passing layers (the receptive field, in hops).
        hidden: hidden width.
        dropout: dropout after each layer during training, in ``[0, 1)``.
        heads: attention heads (GAT only; heads are averaged).
        activation: the nonlinearity between layers and inside GIN's MLPs. ``"gelu"`` (default) is smooth:
            influence functions need a twice-differentiable objective, and with ReLU's kinks the L-BFGS
            polish stalls and the Hessian misleads (Koh & Liang 2017 smooth ReLU for the same reason).
            The paper's one-layer GCN has no activation, so this does not touch it. ``"relu"`` and ``"elu"``
            (PyG's defaults for its ``GCN``/``GIN``/``GraphSAGE`` and common for ``GAT``) are accepted for
            supplied models; the audit warns about their kinks. ``"identity"``: none (PyG's ``act=None``; with
            ``head_activation``, a one-layer model whose head reads the convolution's output through dropout alone,
            as the paper's GCN).
        head: a linear head after the last layer (this project's layout); ``False``: the last layer outputs the
            logits itself, as a ``torch_geometric.nn.models`` ``GCN``/``GIN``/``GraphSAGE``/``GAT`` with
            ``out_channels`` does (see :mod:`bind_core.models.pyg`).
        outputs: the number of logits; ``0`` (default) is one for two classes (sigmoid) and one per class
            otherwise; two classes may also have ``2`` (softmax, as PyG models are usually trained).
        concat: GAT only: the hidden layers concatenate their heads (each ``hidden / heads`` wide) instead of
            averaging them; with ``head=False`` the last layer averages them, as PyG's ``GAT`` does.
        attention: GAT only: the attention scores' activation. ``"smooth"``: ``s·x + (1 − s)·act(x)`` (see
            :class:`SmoothGATConv`); ``"leaky_relu"``: GAT's own leaky ReLU, whatever ``activation`` is.
        negative_slope: GAT only: ``s`` above (0.2 as in GAT).
        last_heads: GAT only, with ``head=False``: the heads of the last layer, which averages them (the GAT of
            Veličković et al. and PyG's ``examples/gat.py`` end with one); ``0`` (default): ``heads``, as PyG's
            ``GAT`` class does.
        head_activation: with ``head``: the last layer's output goes through the activation and dropout before the
            head, as in PyG's ``BasicGNN`` with ``jk="last"`` and in a class of one's own that ends in a linear
            classifier after its convolutions; ``False`` (default): the head reads the last layer's output as it
            is (this project's layout, the paper's one-layer GCN).
        norm: ``"batch"``: a batch normalisation after each convolution whose output goes through the activation
            (every one but the logits', and the last before an activated head), as PyG's ``BasicGNN`` with
            ``norm="batch_norm"`` places it (:mod:`bind_core.models.norms`: trained with the rows' statistics,
            audited in evaluation mode, held as given by the attribution); ``"layer"``: a layer normalisation of
            each node's row in the same places (``norm="layer_norm"`` with ``mode="node"``; its scale and shift
            fitted with the rest); ``""`` (default): none.
        norm_eps: the normalisation's ``ε``.
        norm_momentum: a batch normalisation's running statistics' momentum while training (``None``: a
            cumulative average, as ``torch.nn.BatchNorm1d`` takes it).
        norm_affine: the normalisation has a scale and shift (``γ``, ``β``).
        act_first: with ``norm``: the activation before the normalisation (PyG's ``act_first``).
        v2: GAT only: GATv2's layers (``GATv2Conv``: the scores' activation before the attention vector).
        share_weights: GAT with ``v2`` only: the source and target nodes' linear maps are one (PyG's
            ``share_weights``).
        residual: GAT only: each layer adds a linear map of its input, without bias (PyG's ``residual``).
        normalize: SAGE only: each layer's output divided by its L2 norm, node by node (PyG's ``SAGEConv`` with
            ``normalize=True``, as NIFTY's and BIND's reference SAGE are built).
    """

    section: ClassVar[str] = "model"

    arch: str = "gcn"
    layers: int = 1
    hidden: int = 16
    dropout: float = 0.5
    heads: int = 1
    activation: str = "gelu"
    head: bool = True
    outputs: int = 0
    concat: bool = False
    attention: str = "smooth"
    negative_slope: float = 0.2
    last_heads: int = 0
    head_activation: bool = False
    norm: str = ""
    norm_eps: float = 1e-5
    norm_momentum: float | None = 0.1
    norm_affine: bool = True
    act_first: bool = False
    v2: bool = False
    share_weights: bool = False
    residual: bool = False
    normalize: bool = False

    def kinks(self) -> list[str]:
        """Where the model's function has kinks: a non-smooth activation between layers or in GIN's MLPs, and GAT's
        leaky-ReLU attention scores.

        Returns:
            One phrase per place (empty for a smooth model).
        """
        out = []
        between = self.layers > 1 or self.head_activation
        if self.activation in NON_SMOOTH_ACTIVATIONS and (between or self.arch == "gin"):
            where = "between layers" if self.layers > 1 else "before the head" if between else "in GIN's MLPs"
            out.append(f"{self.activation.upper() if self.activation == 'elu' else 'ReLU'} {where}")
        if self.arch == "gat" and (self.attention == "leaky_relu" or self.activation == "relu"):
            out.append(f"{self.gat_name}'s leaky-ReLU attention scores")
        return out

    @property
    def stationary_point(self) -> str | None:
        """Why the training objective has no stationary point, or ``None`` where it may have one. A normalising
        SAGE's layers divide each output row by its norm, so scaling a layer's weights changes no prediction while
        the weight decay falls with their scale: the objective decreases as they shrink, and no polish can end."""
        if self.normalize:
            return (
                "a SAGE that normalises its layers' outputs (normalize) has no stationary point: its predictions do "
                "not change when a layer's weights are scaled, and the weight decay falls as they shrink"
            )
        return None

    @property
    def gat_name(self) -> str:
        """``"GAT"`` or ``"GATv2"``."""
        return "GATv2" if self.v2 else "GAT"

    @property
    def row_separable(self) -> bool:
        """True for one-layer GCN, GIN and SAGE without a normalisation: output rows depend only on rows of the
        aggregated features (a normalisation trains on every node's rows together)."""
        return self.arch in ("gcn", "gin", "sage") and self.layers == 1 and not self.norm

    @property
    def normalised_layers(self) -> int:
        """How many convolutions' outputs are normalised: those followed by the activation (every one but the
        logits'; the last too before an activated head); 0 without ``norm``."""
        return 0 if not self.norm else self.layers - 1 + int(self.head_activation)

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ConfigError(f"arch: {self.arch!r} is not one of {', '.join(ARCHS)}")
        if not 1 <= self.layers <= 8:
            raise ConfigError(f"layers: {self.layers!r} must be between 1 and 8")
        if not 1 <= self.hidden <= 4096:
            raise ConfigError(f"hidden: {self.hidden!r} must be between 1 and 4096")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout: {self.dropout!r} must be in [0, 1)")
        if self.activation not in ACTIVATIONS:
            raise ConfigError(f"activation: {self.activation!r} is not one of {', '.join(ACTIVATIONS)}")
        if not 1 <= self.heads <= 16:
            raise ConfigError(f"heads: {self.heads!r} must be between 1 and 16")
        if not 0 <= self.outputs <= 4096:
            raise ConfigError(f"outputs: {self.outputs!r} must be between 0 (automatic) and 4096")
        if self.attention not in ATTENTION_SCORES:
            raise ConfigError(f"attention: {self.attention!r} is not one of {', '.join(ATTENTION_SCORES)}")
        if not 0.0 <= self.negative_slope < 1.0:
            raise ConfigError(f"negative_slope: {self.negative_slope!r} must be in [0, 1)")
        if not 0 <= self.last_heads <= 16:
            raise ConfigError(f"last_heads: {self.last_heads!r} must be between 0 (heads) and 16")
        if self.head_activation and not self.head:
            raise ConfigError("head_activation: only with a head (head true)")
        if self.last_heads and (self.arch != "gat" or self.head):
            raise ConfigError("last_heads: only for a GAT whose last layer outputs the logits (head false)")
        if self.norm not in NORMS:
            raise ConfigError(f"norm: {self.norm!r} is not one of {', '.join(map(repr, NORMS))}")
        if not 0.0 < self.norm_eps < 1.0:
            raise ConfigError(f"norm_eps: {self.norm_eps!r} must be in (0, 1)")
        if self.norm_momentum is not None and not 0.0 <= self.norm_momentum <= 1.0:
            raise ConfigError(f"norm_momentum: {self.norm_momentum!r} must be in [0, 1] (or null)")
        for name in ("v2", "residual"):
            if getattr(self, name) and self.arch != "gat":
                raise ConfigError(f"{name}: only for a GAT (arch gat)")
        if self.normalize and self.arch != "sage":
            raise ConfigError("normalize: only for a SAGE (arch sage)")
        if self.share_weights and not (self.arch == "gat" and self.v2):
            raise ConfigError("share_weights: only for a GATv2 (arch gat, v2 true)")
        if self.concat and self.hidden % self.heads:
            raise ConfigError(f"concat: hidden ({self.hidden}) must be a multiple of heads ({self.heads})")

    def num_outputs(self, num_classes: int) -> int:
        """The number of logits the model ends with.

        Args:
            num_classes: the label's classes.

        Returns:
            ``outputs`` when set, else 1 for two classes (one logit) and ``num_classes`` otherwise.

        Raises:
            ConfigError: ``outputs`` does not fit ``num_classes``.
        """
        auto = 1 if num_classes == 2 else num_classes
        if self.outputs == 0 or self.outputs == auto or (num_classes == 2 and self.outputs == 2):
            return self.outputs or auto
        raise ConfigError(f"outputs: {self.outputs} logits do not fit {num_classes} classes")


class GNN(nn.Module):
    """``layers`` message-passing layers with an activation and dropout between them, then a linear head (or,
    with ``config.head`` off, the last layer's output as the logits).

    Args:
        config: the architecture.
        in_dim: number of node features.
        num_classes: number of classes; the head has one logit when it is 2.
    """

    def __init__(self, config: ModelConfig, in_dim: int, num_classes: int) -> None:
        super().__init__()
        self.config = config
        self.in_dim = in_dim
        self.num_classes = num_classes
        outputs = config.num_outputs(num_classes)
        dims = [in_dim] + [config.hidden] * config.layers
        if not config.head:
            dims[-1] = outputs
        last = config.layers - 1
        self.convs = nn.ModuleList(
            _conv(config, a, b, last=i == last) for i, (a, b) in enumerate(itertools.pairwise(dims))
        )
        norms = [self._norm(dims[i + 1]) for i in range(config.normalised_layers)]
        self.norms = nn.ModuleList(norms[: config.layers - 1])
        """The normalisation of each convolution's output but the last's (empty without ``config.norm``)."""
        self.head: nn.Module = nn.Identity()
        if config.head:
            head = nn.Linear(config.hidden, outputs)
            nn.init.xavier_uniform_(head.weight)
            nn.init.zeros_(head.bias)
            last_norm = norms[-1] if len(norms) == config.layers else None
            self.head = ActivatedHead(head, config, last_norm) if config.head_activation else head
        self._expand = False

    def _norm(self, width: int) -> nn.Module:
        """A normalisation of ``width`` channels as the config describes it."""
        c = self.config
        return make_norm(c.norm, width, eps=c.norm_eps, momentum=c.norm_momentum, affine=c.norm_affine)

    @property
    def expand_activations(self) -> bool:
        """While True, the activations between layers and in GAT's attention scores are their second-order
        expansions about the point (:mod:`bind_core.models.activations`: the same value, gradient and Hessian, for
        forming Hessians only)."""
        return self._expand

    @expand_activations.setter
    def expand_activations(self, on: bool) -> None:
        self._expand = on
        for conv in self.convs:
            if isinstance(conv, SmoothScores):
                conv.expand_activation = on
        if isinstance(self.head, ActivatedHead):
            self.head.expand_activation = on

    def activation(self, h: Tensor) -> Tensor:
        """The activation between layers (its second-order expansion while :attr:`expand_activations`)."""
        return activation_fn(self.config.activation, expanded=self._expand)(h)

    def activate(self, i: int, h: Tensor, params: Mapping[str, Tensor] | None = None) -> Tensor:
        """Conv ``i``'s output ``h`` (``i`` below the last) as the next conv reads it but for dropout: through its
        normalisation, if any, and the activation (:func:`~bind_core.models.norms.norm_act`). A node's row depends on
        that row alone (in evaluation mode); elementwise too but with a layer normalisation
        (:attr:`elementwise_between_layers`). ``params``: the attribution's parameters by name, for a path that runs
        the layers by hand outside ``functional_call``: a layer normalisation's scale and shift are read from them
        (they are part of ``θ``; a batch normalisation's are held, the module's own)."""
        norm: Norm | None = self.norms[i] if self.norms else None
        if params is not None and norm is not None and self.config.norm == "layer":
            norm = layer_norm_at(cast(nn.Module, norm), params.get(f"norms.{i}.weight"), params.get(f"norms.{i}.bias"))
        return norm_act(norm, self.activation, h, act_first=self.config.act_first)

    @property
    def elementwise_between_layers(self) -> bool:
        """Whether :meth:`activate` is elementwise in evaluation mode (its derivative a diagonal): not with a layer
        normalisation, which mixes a row's channels."""
        return self.config.norm != "layer"

    def pre_activation(self, i: int, h: Tensor) -> Tensor:
        """Conv ``i``'s output ``h`` as it enters the activation: normalised first, where the model normalises
        before its activation (where a ReLU's kinks lie)."""
        return h if not self.norms or self.config.act_first else normalised(self.norms[i], h)

    @property
    def row_separable(self) -> bool:
        """True for one-layer GCN, GIN and SAGE: output rows depend only on rows of the aggregated features."""
        return self.config.row_separable

    def prepare(
        self, graph: Graph, dtype: torch.dtype | None = None, device: torch.device | str | None = None
    ) -> GraphInputs:
        """Precompute what does not change between epochs: self-loops, GCN normalisation, aggregated rows.

        The result depends only on the graph and the architecture (not on the weights), and a graph is
        immutable, so it is cached per graph, architecture, dtype and device (a few entries per graph, freed
        with it): an audit prepares each large graph once rather than at every evaluation.

        Raises:
            ModelDoesNotFitError: the graph's features are not the model's inputs, or its label has a class the
                model has no output for (before the forward pass would fail inside torch).
        """
        self._require_inputs(graph)
        dtype = dtype or next(self.parameters()).dtype
        device = torch.device(device or next(self.parameters()).device)
        eps = float(getattr(self.convs[0], "eps", 0.0)) if self.config.arch == "gin" else 0.0
        key = (self.config.arch, self.row_separable, eps, dtype, str(device))
        return prepared_inputs(graph, key, lambda: self._prepare(graph, dtype, device))

    def _require_inputs(self, graph: Graph) -> None:
        """Refuse a graph this model cannot be run on: other features, or a class it has no output for."""
        problem = features_problem(self.in_dim, graph.num_features)
        if problem is not None:
            raise ModelDoesNotFitError([("in_dim", problem)])
        if graph.num_classes > self.num_classes:
            names = graph.class_names or tuple(str(c) for c in range(graph.num_classes))
            outputs = self.config.num_outputs(self.num_classes)
            found = classes_problem(outputs, self.num_classes, graph.num_classes, label=graph.label_name, names=names)
            raise ModelDoesNotFitError([("num_classes", str(found))])

    def require_fit(self, graph: Graph) -> None:
        """Refuse a graph this model does not fit exactly: other features, or a label of another number of classes
        (:func:`~bind_core.models.fits.require_fit`, the check a supplied model passes before its audit).

        Raises:
            ModelDoesNotFitError: naming the model's inputs or outputs and the graph's.
        """
        require_fit(
            self.in_dim,
            self.config.num_outputs(self.num_classes),
            self.num_classes,
            graph.num_features,
            graph.num_classes,
            label=graph.label_name,
            names=graph.class_names or tuple(str(c) for c in range(graph.num_classes)),
        )

    def _prepare(self, graph: Graph, dtype: torch.dtype, device: torch.device) -> GraphInputs:
        x = graph.x.to(device=device, dtype=dtype)
        ei = graph.edge_index.to(device)
        arch = self.config.arch
        if not self.row_separable:  # message passing: each layer one CSR product (GAT: PyG's attention)
            if arch == "gcn":
                ei = with_self_loops(ei, graph.num_nodes)
            weight, adjacency = message_adjacency(arch, ei, graph.num_nodes, dtype)
            eps = float(getattr(self.convs[0], "eps", 0.0))
            z = None if adjacency is None else aggregate_features(arch, adjacency, x, eps)
            return GraphInputs(x=x, edge_index=ei, edge_weight=weight, x_prop=z, adjacency=adjacency)
        # One-layer models: the aggregated rows, computed once (the paper's case, kept bit for bit as before).
        if arch == "gcn":
            ei, w = gcn_norm(ei, graph.num_nodes, dtype)
            return GraphInputs(x=x, edge_index=ei, edge_weight=w, x_prop=propagate(x, ei, w))
        ones = torch.ones(ei.shape[1], dtype=dtype, device=device)
        if arch == "gin":
            x_prop = propagate(x, ei, ones) + (1 + float(cast(GINConv, self.convs[0]).eps)) * x
        else:  # sage, mean aggregation (an isolated node aggregates to zero, as in PyG)
            deg = torch.bincount(ei[0], minlength=graph.num_nodes).to(dtype).clamp(min=1)
            x_prop = torch.cat([propagate(x, ei, ones / deg[ei[0]]), x], dim=1)
        return GraphInputs(x=x, edge_index=ei, edge_weight=None, x_prop=x_prop)

    def forward(self, inputs: GraphInputs | None, rows: Tensor | None = None, *, z: Tensor | None = None) -> Tensor:
        """Logits ``[n, out]`` (or ``[len(rows), out]`` for the given rows).

        For a row-separable model, ``z`` (rows of the aggregated features) may be given instead of ``inputs``.
        """
        if z is not None:
            return self.forward_propagated(z)
        if inputs is None:
            raise ValueError("forward needs inputs (or z for a row-separable model)")
        if inputs.x_prop is not None and self.row_separable:
            z = inputs.x_prop if rows is None else inputs.x_prop[rows]
            return self.forward_propagated(z)
        return self._layers_from(0, inputs.x, inputs, rows)

    def forward_after_first(self, h: Tensor, inputs: GraphInputs, rows: Tensor | None = None) -> Tensor:
        """Logits (as :meth:`forward`, in evaluation mode) from the first conv's output ``h`` (``[n, ·]``) on every
        row, already activated: the layers after the first, on ``inputs``. A deletion changes the first layer's
        output only where it changes the aggregated features, so at fixed weights the rest of ``h`` can be reused."""
        return self._layers_from(1, h, inputs, rows, activated=True)

    def _layers_from(
        self, start: int, h: Tensor, inputs: GraphInputs, rows: Tensor | None, *, activated: bool = False
    ) -> Tensor:
        """Convs ``start..L−1`` on ``h`` (the input of conv ``start``: a conv's output, before the activation unless
        ``activated``, for ``start ≥ 1``), then the head."""
        last = len(self.convs) - 1
        # Dropout in training draws a mask per computed row: its draws, and so a seeded training's model, stay as
        # they were by computing every row there.
        laddered = rows is not None and last - max(start, 1) >= 1 and not (self.training and self.config.dropout > 0)
        if inputs.adjacency is not None and rows is not None and laddered:
            return self._middle_rows(start, h, inputs, inputs.adjacency, rows, activated)
        for i in range(start, len(self.convs)):
            if i > 0 and not (activated and i == start):
                h = dropout(self.activate(i - 1, h), self.config.dropout, self.training)
            if inputs.adjacency is not None and rows is not None and i == last:
                # The last layer computes only the wanted rows: a block of the adjacency's rows.
                h = self._csr_layer(self.convs[i], inputs.adjacency.rows(rows), h, h[rows])
                return cast(Tensor, self.head(h))
            h = self.layer(i, h, inputs)
        out = cast(Tensor, self.head(h))
        return out if rows is None else out[rows]

    def _middle_rows(
        self, start: int, h: Tensor, inputs: GraphInputs, adjacency: Adjacency, rows: Tensor, activated: bool
    ) -> Tensor:
        """:meth:`_layers_from` for a model with middle layers (three or more) when only ``rows`` are wanted: each
        layer after the first computes only the rows the next one reads (:func:`~bind_core.data.ladder.ladder`)."""
        first_middle = max(start, 1)
        if start == 0:
            h = self.layer(0, h, inputs)
        rungs = ladder(adjacency, rows, len(self.convs) - 1 - first_middle)
        for i, rung in enumerate(rungs, first_middle):
            if not (activated and i == start):
                h = dropout(self.activate(i - 1, h), self.config.dropout, self.training)
            h = self._csr_layer(self.convs[i], rung.block, h, h[rung.root])
        return cast(Tensor, self.head(h))

    def layer(self, i: int, h: Tensor, inputs: GraphInputs) -> Tensor:
        """Conv ``i`` on the whole graph's rows ``h`` (already activated): its pre-activation output ``[n, ·]``."""
        conv = self.convs[i]
        if i == 0 and inputs.x_prop is not None:  # the aggregated features, computed once per graph
            return self.first_layer(inputs.x_prop)
        if inputs.adjacency is not None:
            return self._csr_layer(conv, inputs.adjacency, h, h)
        if inputs.edge_weight is not None:
            return cast(Tensor, conv(h, inputs.edge_index, inputs.edge_weight))
        edges = inputs.edge_index if inputs.layer_edges is None else inputs.layer_edges[i]
        return cast(Tensor, conv(h, edges))

    def forward_blocks(self, h: Tensor, blocks: Sequence[Adjacency]) -> Tensor:
        """Logits of a mini-batch's nodes from its sampled computation graph (:mod:`bind_core.training.sampling`),
        with the same parameters as :meth:`forward`.

        ``blocks`` are the layers' bipartite matrices, the first layer's first: block ``i`` is ``[r_i, c_i]`` with
        output rows the first ``r_i`` of its ``c_i`` input rows (a node's own row comes first, as GIN's and SAGE's
        root terms need), and ``c_{i+1} = r_i``. With one block per layer, ``h`` holds the raw features of the first
        block's input rows; with one fewer, the first layer is applied to ``h`` as the aggregated features
        (:func:`~bind_core.models.propagation.aggregate_features` over every neighbour, computed once per graph) of
        the first block's input rows (or of the batch's nodes, for a one-layer model). GCN, GIN and SAGE only.
        """
        layers = self.config.layers
        start = layers - len(blocks)
        if self.config.arch not in ("gcn", "gin", "sage") or start not in (0, 1):
            raise ValueError(f"forward_blocks: a {self.config.arch} model takes {layers} or {layers - 1} blocks")
        if start == 1:
            h = self.first_layer(h)
        for i, block in enumerate(blocks, start):
            if i > 0:
                h = dropout(self.activate(i - 1, h), self.config.dropout, self.training)
            h = self._csr_layer(self.convs[i], block, h, h[: block.shape[0]])
        return cast(Tensor, self.head(h))

    def _csr_layer(self, conv: nn.Module, adjacency: Adjacency, h: Tensor, root: Tensor) -> Tensor:
        """One layer as a CSR product (the PyG layer's arithmetic; ``root``: the output rows' own rows of ``h``)."""
        arch = self.config.arch
        if arch == "gcn":  # GCNConv: Â·(h·Wᵀ) + b, or (Â·h)·Wᵀ + b where that costs less (equal to rounding)
            gcn = cast(GCNConv, conv)
            if aggregate_first(adjacency, gcn.in_channels, gcn.out_channels):
                return cast(Tensor, gcn.lin(spmm(adjacency, h))) + cast(Tensor, gcn.bias)
            return spmm(adjacency, cast(Tensor, gcn.lin(h))) + cast(Tensor, gcn.bias)
        if arch == "sage":  # SAGEConv (mean): W_l·mean_N(h) + b + W_r·h
            sage = cast(SAGEConv, conv)
            return sage_output(cast(Tensor, sage.lin_l(spmm(adjacency, h)) + sage.lin_r(root)), sage.normalize)
        gin = cast(GINConv, conv)  # GINConv: MLP((1 + ε)·h + Σ_N h)
        return cast(Tensor, gin.nn((1 + float(gin.eps)) * root + spmm(adjacency, h)))

    def forward_propagated(self, z: Tensor) -> Tensor:
        """A row-separable model from aggregated rows ``z`` (see :meth:`prepare`) to logits."""
        return cast(Tensor, self.head(self.first_layer(z)))

    def first_layer(self, z: Tensor) -> Tensor:
        """The first conv's output from the aggregated features ``z``
        (:func:`~bind_core.models.propagation.aggregate_features`): GCN
        ``(Â·X)·Wᵀ + b``, GIN ``MLP((1 + ε)·X + A·X)``, SAGE ``W_l·mean_N(X) + b + W_r·X``, the same as the conv on
        ``X`` (its aggregation is linear and comes before any weight)."""
        conv = self.convs[0]
        if self.config.arch == "gcn":
            gcn = cast(GCNConv, conv)
            return cast(Tensor, gcn.lin(z) + gcn.bias)
        if self.config.arch == "gin":
            return cast(Tensor, cast(GINConv, conv).nn(z))
        sage = cast(SAGEConv, conv)
        return sage_first_layer(z, sage.lin_l.weight, sage.lin_l.bias, sage.lin_r.weight, normalize=sage.normalize)


def _conv(config: ModelConfig, a: int, b: int, *, last: bool) -> nn.Module:
    """Layer ``a → b``; ``last``: the last layer (which averages GAT's heads when it outputs the logits)."""
    if config.arch == "gcn":
        return cast(nn.Module, GCNConv(a, b, normalize=False))
    if config.arch == "gin":
        act = ACTIVATION_MODULES[config.activation]()
        return cast(nn.Module, GINConv(nn.Sequential(nn.Linear(a, b), act, nn.Linear(b, b)), train_eps=False))
    if config.arch == "sage":
        return cast(nn.Module, SAGEConv(a, b, aggr="mean", normalize=config.normalize))
    concat = config.concat and not (last and not config.head)
    score = "leaky_relu" if config.attention == "leaky_relu" else config.activation
    heads = config.last_heads if last and config.last_heads else config.heads
    extra = {"share_weights": config.share_weights} if config.v2 else {}
    return (SmoothGATv2Conv if config.v2 else SmoothGATConv)(
        a,
        b // heads if concat else b,
        heads=heads,
        concat=concat,
        add_self_loops=True,
        negative_slope=config.negative_slope,
        residual=config.residual,
        activation=score,
        **extra,
    )


class ActivatedHead(nn.Module):
    """A linear head after the activation and dropout (:attr:`ModelConfig.head_activation`): ``lin(drop(act(h)))``,
    its parameters ``head.lin.weight`` and ``head.lin.bias``; with the last convolution's normalisation ``norm``
    (``head.norm.*``), applied in the model's order (:func:`~bind_core.models.norms.norm_act`)."""

    def __init__(self, lin: nn.Linear, config: ModelConfig, norm: nn.Module | None = None) -> None:
        super().__init__()
        self.lin = lin
        self.norm = norm
        self.activation, self.p, self.act_first = config.activation, config.dropout, config.act_first
        self.expand_activation = False  # set by GNN.expand_activations

    def forward(self, h: Tensor) -> Tensor:
        act = activation_fn(self.activation, expanded=self.expand_activation)
        h = norm_act(self.norm, act, h, act_first=self.act_first)
        return cast(Tensor, self.lin(dropout(h, self.p, self.training)))


def flat_parameters(module: nn.Module) -> tuple[list[str], list[torch.Size], Tensor]:
    """The module's parameter names, shapes, and values as one flat detached vector (for ``torch.func``): the
    attribution's ``θ``, which holds a normalisation's scale and shift as given (:mod:`bind_core.models.norms`)."""
    held = {id(p) for m in module.modules() if is_normalisation(m) for p in m.parameters()}
    named = [(n, p) for n, p in module.named_parameters() if id(p) not in held]
    flat = torch.cat([p.detach().reshape(-1) for _, p in named])
    return [n for n, _ in named], [p.shape for _, p in named], flat


def unflatten_parameters(flat: Tensor, names: list[str], shapes: list[torch.Size]) -> dict[str, Tensor]:
    """``{name: view of flat}``, the inverse of :func:`flat_parameters`, for ``functional_call``."""
    sizes = [math.prod(shape) for shape in shapes]
    return {n: t.view(s) for n, t, s in zip(names, torch.split(flat, sizes), shapes, strict=True)}


def probabilities(logits: Tensor) -> Tensor:
    """Class probabilities ``[k, C]`` from logits (one logit → ``[1 − σ, σ]``)."""
    if logits.shape[1] == 1:
        p = torch.sigmoid(logits[:, 0])
        return torch.stack([1 - p, p], dim=1)
    return torch.softmax(logits, dim=1)


def require_finite(proba: Tensor, what: str = "predicted probabilities") -> None:
    """Refuse ``proba: [k, C]`` unless every entry is finite (a NaN row's argmax would be class 0).

    Raises:
        NonFiniteError: naming how many rows are affected and the first of them.
    """
    bad = ~torch.isfinite(proba.detach()).reshape(proba.shape[0], -1).all(dim=1) if proba.numel() else None
    if bad is not None and bool(bad.any()):
        first = int(bad.nonzero()[0])
        raise NonFiniteError(
            f"{what}: {int(bad.sum())} of {proba.shape[0]} rows are not finite (NaN or inf; the first is row "
            f"{first}); the model's weights or its inputs overflow, so no metric can be computed from them"
        )


def node_losses(logits: Tensor, y: Tensor) -> Tensor:
    """Per-node cross-entropy ``[k]`` (binary: with logits on the single output)."""
    if logits.shape[1] == 1:
        return F.binary_cross_entropy_with_logits(logits[:, 0], y.to(logits.dtype), reduction="none")
    return F.cross_entropy(logits, y, reduction="none")
