"""Datasets: versioned records (validation, digests, adding a version, diffs) and the expansion of an
experiment over a dataset version into scenarios."""
