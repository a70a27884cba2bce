"""Measuring bias: utility and fairness metrics (ΔSP, ΔEO, PDD), bootstrap intervals and the per-group breakdown."""
