"""The data an audit reads: the attributed graph with its split, its sparse adjacency, the sensitive groups, and the
datasets (built-in, uploaded, synthetic).
"""
