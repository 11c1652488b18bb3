"""GPU exporter (NVML via nvidia-ml-py) with per-version attribution and a CPU fallback.

One collector per concern: devices (gpu_*), processes attributed to a TF Serving
version (process_*), the CPU fallback (process RSS/CPU/threads per version) and
the exporter's own health (exporter_*). NVML, /proc and the docker client are
passed in, so tests replace only the hardware boundary.
"""
