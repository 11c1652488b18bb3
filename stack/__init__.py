"""Bring the benchmark stack up and down: versions registry, venvs, runtimes."""
