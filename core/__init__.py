"""What every component above it shares: the versions registry, venvs, paths, ports, YAML read safely, CPU
placement. It imports nothing of the project but fileio; stack, loadgen, models and analysis stand on it."""
