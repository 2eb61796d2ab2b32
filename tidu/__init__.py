"""tidu: symbolic automatic differentiation on an e-graph."""
