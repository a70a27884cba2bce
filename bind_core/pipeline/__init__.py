"""The audit pipeline: configuration, the stages from training to validation, the cost estimate before a run, and the
caveats a reader must see.

The service's hooks into it (what a web service or a queue needs beyond :func:`bind_core.run_audit`): which stages a
configuration runs, what an audit will cost before it is queued, a supplied model checked against a graph and prepared
for its audit (on another version of its graph, that version's inputs carried over first) with the warnings its fit
to its own training nodes calls for (:func:`supplied_model_warnings`, the service's check at registration), the seeds
of the check against chance when it runs by default, the bounds a request is checked against before it is queued
(the training's epochs, the debiasing budgets against a graph's training set), and the estimate of deleting a chosen
set of training nodes (the what-if) and its verification by retraining, and a retrained model as weights and a config
to take away.
The typed results are :mod:`bind_core.pipeline.results`.
"""

from bind_core.data.carry import InputSchema, UnknownCategories, carry_inputs
from bind_core.debiasing.nodesets import check_budgets
from bind_core.debiasing.verify import Verification, VerifiedSet, verify_set
from bind_core.debiasing.what_if import SetEstimate, choose, estimate_set
from bind_core.models.fits import class_order, fit_problems
from bind_core.pipeline.admission import check_measurable_groups
from bind_core.pipeline.budget import AuditCost, GraphSize, audit_cost
from bind_core.pipeline.caveat import CODES as WARNING_CODES
from bind_core.pipeline.caveat import Caveat, codes_of
from bind_core.pipeline.config import AUTO_CHANCE_SEEDS
from bind_core.pipeline.output_order import supplied_model_warnings
from bind_core.pipeline.reference import prepare_for_audit
from bind_core.pipeline.stages import planned_stages
from bind_core.pipeline.what_if_verify import verify_seeds, verify_what_if
from bind_core.training.export import ExportedModel, export_model, retrained_form, weight_names
from bind_core.training.fit_check import TrainingFit
from bind_core.training.output_order import OutputOrder
from bind_core.training.outputs import GivenOutputs, OutputsDifferError, OutputsMatch, read_outputs
from bind_core.training.settings import MAX_EPOCHS, UNTRAINED

__all__ = [
    "AUTO_CHANCE_SEEDS",
    "MAX_EPOCHS",
    "UNTRAINED",
    "WARNING_CODES",
    "AuditCost",
    "Caveat",
    "ExportedModel",
    "GivenOutputs",
    "GraphSize",
    "InputSchema",
    "OutputOrder",
    "OutputsDifferError",
    "OutputsMatch",
    "SetEstimate",
    "TrainingFit",
    "UnknownCategories",
    "Verification",
    "VerifiedSet",
    "audit_cost",
    "carry_inputs",
    "check_budgets",
    "check_measurable_groups",
    "choose",
    "class_order",
    "codes_of",
    "estimate_set",
    "export_model",
    "fit_problems",
    "planned_stages",
    "prepare_for_audit",
    "read_outputs",
    "retrained_form",
    "supplied_model_warnings",
    "verify_seeds",
    "verify_set",
    "verify_what_if",
    "weight_names",
]
