"""Storage: fsspec file helpers, complete-or-absent writes, output guards and the manifest."""
