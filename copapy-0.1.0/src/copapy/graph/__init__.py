"""Graph IR: typed hash-consed nodes, the operation registry and graph passes."""
