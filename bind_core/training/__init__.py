"""Training a GNN: full-batch Adam, the stationary-point polish (L-BFGS, then Newton), the objective, dense Hessians,
and the stationarity check.
"""
