"""Acting on the attribution: deleting harmful training nodes, node sets with disjoint computation graphs, the check
against random deletion, and validation against retraining.
"""
