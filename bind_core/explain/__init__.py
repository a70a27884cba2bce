"""Explanations an auditor can act on: what the harmful training nodes have in common (:mod:`.profile`)."""
