"""The GNN node classifiers an audit explains: the project's CSR-based GCN, GIN, GraphSAGE and GAT, and models trained
with PyG itself.
"""
