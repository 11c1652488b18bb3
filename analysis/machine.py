"""The machine a report was measured on: the CPU's instruction-set flags that decide TensorFlow's defaults, and the
oneDNN default each version applies there.

TensorFlow 2.9 turned oneDNN on by default in its Linux x86 packages, but only on CPUs with the neural-network
instructions (AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX; tensorflow PR#56039); releases before 2.9 leave it off
unless TF_ENABLE_ONEDNN_OPTS=1. So one pair of versions compares oneDNN against Eigen on one machine and Eigen
against Eigen on another: a report that does not say which is not reproducible. (TF 2.9's own
`_pywrap_util_port.IsMklEnabled()` answers False there while its `_Mkl*` kernels run, so the rule is applied here
and the op table shows the kernels each version really ran.)
"""
from __future__ import annotations

FLAGS = {"avx2": "AVX2", "avx512f": "AVX512F", "avx512_vnni": "AVX512_VNNI", "avx512_bf16": "AVX512_BF16",
         "avx_vnni": "AVX_VNNI", "amx_tile": "AMX_TILE", "amx_bf16": "AMX_BF16", "amx_int8": "AMX_INT8"}
ONEDNN_DEFAULT_FROM = (2, 9)
ONEDNN_TRIGGERS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> dict:
    """{"AVX2": True, ...} for every flag of FLAGS; {} where /proc/cpuinfo cannot be read (not Linux)."""
    try:
        with open(cpuinfo) as f:
            line = next((ln for ln in f if ln.startswith("flags")), "")
    except OSError:
        return {}
    have = set(line.partition(":")[2].split())
    return {name: key in have for key, name in FLAGS.items()}


def _release(tensorflow: str) -> tuple:
    try:
        return tuple(int(x) for x in tensorflow.split(".")[:2])
    except ValueError:
        return (0, 0)


def onednn(tensorflow: str, flags: dict, server_env: dict) -> str:
    """"on (TF_ENABLE_ONEDNN_OPTS=1)", "on (default: AVX512_VNNI)", "off (default before 2.9)", ... for one server."""
    forced = server_env.get("TF_ENABLE_ONEDNN_OPTS")
    if forced in ("0", "1"):
        return f"{'on' if forced == '1' else 'off'} (TF_ENABLE_ONEDNN_OPTS={forced})"
    if _release(tensorflow) < ONEDNN_DEFAULT_FROM:
        return "off (default before 2.9)"
    if not flags:
        return "unknown (the CPU's flags could not be read)"
    why = [FLAGS[k] for k in ONEDNN_TRIGGERS if flags.get(FLAGS[k])]
    return f"on (default: {', '.join(why)})" if why else "off (default: no AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX)"


def describe(env: dict) -> str:
    """"AVX2, AVX512F, AVX512_VNNI, AVX512_BF16; not AVX_VNNI, AMX_TILE, ..." from a run's environment."""
    flags = env.get("cpu_flags") or {}
    if not flags:
        return "instruction-set flags unknown"
    have = [k for k, v in flags.items() if v]
    lack = [k for k, v in flags.items() if not v]
    return ", ".join(have or ["none of " + ", ".join(FLAGS.values())]) + (f"; not {', '.join(lack)}" if lack else "")


def line(env: dict) -> str:
    """The report's one line on the machine: CPU, cores, flags, and oneDNN per version."""
    per = env.get("onednn") or {}
    onednn_text = "; ".join(f"{v} {state}" for v, state in per.items())
    return (f"Machine: {env.get('cpu') or 'CPU unknown'}, {env.get('cpus')} cores; {describe(env)}."
            + (f" oneDNN: {onednn_text}." if onednn_text else ""))
