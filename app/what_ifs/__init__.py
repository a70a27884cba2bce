"""What-if verification jobs: retrain without a chosen set of an audit's training nodes and measure what the what-if
estimated (``/v1/audits/{id}/what-ifs``)."""
