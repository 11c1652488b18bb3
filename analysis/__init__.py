"""Compare TF Serving versions: the benchmark protocol, PromQL, statistics, reports, baselines."""
