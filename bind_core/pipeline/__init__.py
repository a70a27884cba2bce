"""The audit pipeline: configuration, the stages from training to validation, the cost estimate before a run, and the
caveats a reader must see.
"""
