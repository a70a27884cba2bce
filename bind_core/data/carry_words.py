"""How the audit speaks of a supplied model's inputs carried from another version of its graph: a registration and
"this version" (the service's registered model), or the table it was trained on and "this table" (``bind-audit run
--trained-on``; :attr:`bind_core.data.carry.InputSchema.trained_on`). Shared by the refusals, the record's sentence
and the warnings, so that each says it alike."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CarryWords"]


@dataclass(frozen=True)
class CarryWords:
    """The phrases, each a fragment of a sentence (lower case)."""

    here: str
    here_graph: str
    source: str
    done: str
    model_was: str
    model_was_not: str
    on_another: str
    fit_source: str
    ignore_advice: str
    ignoring: str
    ignoring_named: str

    @classmethod
    def of(cls, trained_on: str | None) -> CarryWords:
        """The words for a model registered with the service (``trained_on`` empty or ``None``) or trained on the
        table named ``trained_on``."""
        if not trained_on:
            return cls(
                here="this version",
                here_graph="this version of its graph",
                source="the registration",
                done="registered",
                model_was="the model was registered for",
                model_was_not="the model was not registered with",
                on_another="registered on another version of this graph",
                fit_source="the version it was registered on",
                ignore_advice="register the model with unknown_categories 'ignore'",
                ignoring="its registration asks",
                ignoring_named="its registration asks (unknown_categories 'ignore')",
            )
        table = repr(trained_on)
        return cls(
            here="this table",
            here_graph="this table",
            source="the trained-on table",
            done="trained",
            model_was=f"the model was trained on {table} with",
            model_was_not=f"the model was not trained with ({table} lacks them)",
            on_another=f"trained on another table of this graph, {table}",
            fit_source=table,
            ignore_advice="read it with unknown_categories 'ignore' (bind-audit run: --unknown-categories ignore)",
            ignoring="unknown_categories 'ignore' asks",
            ignoring_named="unknown_categories 'ignore' asks",
        )
