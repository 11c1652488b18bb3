"""Whether a TF Serving image has machine code for this GPU.

The -gpu images of TF Serving 2.6-2.12 are built with TF_CUDA_COMPUTE_CAPABILITIES ending at
compute_80 (tensorflow_serving/tools/docker/Dockerfile.devel-gpu at those tags): on a newer GPU
(an H100/H200 is 9.0) every kernel is JIT-compiled from PTX when the model loads, so cold starts
and first requests are not comparable with a newer image's, and a probe's startup budget may run
out. Such a version gets a warning and a longer startup budget.
"""
from __future__ import annotations

import importlib
from core import settings

NEWEST_COMPUTE = {"2.6": (8, 0), "2.8": (8, 0), "2.9": (8, 0), "2.12": (8, 0)}  # by release; newer: native
JIT_BUDGET_FACTOR = 4  # JIT of every kernel of a model took minutes, not seconds, on the first load


def gpu_capabilities(nvml_module: str | None = None) -> list:
    """[(major, minor)] of every GPU NVML sees ([] without NVML or a GPU); NVML injected by name
    (TFSB_NVML_MODULE, the tests' fake) as the exporter's is."""
    try:
        nv = importlib.import_module(nvml_module or settings.nvml_module())
        nv.nvmlInit()
        return [tuple(nv.nvmlDeviceGetCudaComputeCapability(nv.nvmlDeviceGetHandleByIndex(i)))
                for i in range(nv.nvmlDeviceGetCount())]
    except Exception:  # noqa: BLE001 - no NVML, no driver, no GPU: nothing to compare
        return []


def check(version_name: str, capabilities: list) -> str:
    """The warning for one version on these GPUs ("" when its image has their machine code)."""
    newest = NEWEST_COMPUTE.get(version_name.removesuffix("-b"))
    if not newest or not capabilities or max(capabilities) <= newest:
        return ""
    cap = max(capabilities)
    return (f"TF Serving {version_name}'s -gpu image has machine code up to compute capability {newest[0]}.{newest[1]}, "
            f"this GPU is {cap[0]}.{cap[1]}: its kernels are JIT-compiled at load, so its cold start and first "
            f"requests are not comparable with newer images'; startup budget x{JIT_BUDGET_FACTOR}")
