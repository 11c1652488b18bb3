"""Knobs: TensorFlow settings a compare varies beside the version, so "2.9 is faster" can be told from
"oneDNN on is faster" (TF turned oneDNN on by default on Linux x86 in 2.9; thread pools follow the cores).

    KNOBS="onednn=0,1"                 TF_ENABLE_ONEDNN_OPTS in the server's (and ceiling's) environment
    KNOBS="intra_op=1,2 inter_op=1"    TF Serving's --tensorflow_intra_op_parallelism / _inter_op_ flags
    KNOBS="load_threads=0,1"           TF Serving's --num_load_threads (0: loads on the request threads, serving#1866)
    KNOBS="warmup=0,1"                 TF Serving's --enable_model_warmup: the model's warmup records replayed at load
                                       (cold starts with and without them: COLD_STARTS=3 KNOBS="warmup=0,1")
    KNOBS="malloc=glibc,jemalloc"      the allocator: LD_PRELOAD of Debian's libjemalloc2 / libtcmalloc-minimal4
                                       (memory growth under load and across reloads depends on it: serving#1215)

Every combination of every selected version is one server of its own, named after what it sets
("2.9-onednn0", "2.9-intra1-inter1"), on its own ports: the compare interleaves them like
versions, and the report names them. Both runtimes apply a knob the same way (the drop-in honours
the flags; a container gets the same environment and flags), and so does the in-process ceiling.
"""
from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from core.errors import UsageError

# knob -> (short name in a server's label, values allowed, how it is applied)
KNOBS = {
    "onednn": ("onednn", ("0", "1"), ("env", "TF_ENABLE_ONEDNN_OPTS")),
    "intra_op": ("intra", None, ("flag", "--tensorflow_intra_op_parallelism")),
    "inter_op": ("inter", None, ("flag", "--tensorflow_inter_op_parallelism")),
    "malloc": ("", ("glibc", "jemalloc", "tcmalloc"), ("preload", "LD_PRELOAD")),
    # a server flag the in-process ceiling has no use for (it loads one model once)
    "load_threads": ("load", tuple(str(n) for n in range(17)), ("server_flag", "--num_load_threads")),
    "warmup": ("warmup", ("0", "1"), ("server_flag", "--enable_model_warmup")),
}
# The allocators' libraries: Debian's paths on amd64, the host's and the images' `make images` builds alike
# (stack/images.py installs both packages). glibc: nothing preloaded.
LIB_DIR = Path("/usr/lib/x86_64-linux-gnu")
PRELOAD = {"jemalloc": ("libjemalloc.so.2", "libjemalloc2"), "tcmalloc": ("libtcmalloc_minimal.so.4",
                                                                          "libtcmalloc-minimal4")}
BOOL_FLAGS = {"warmup": {"0": "false", "1": "true"}}  # a boolean flag's spelling as TF Serving's parser takes it
PORT_STEP = 2  # each variant's gRPC and REST ports: the version's, shifted by 2 per variant


class KnobError(UsageError):
    """A KNOBS value that cannot be applied; one line."""


def parse(text: str | None) -> list:
    """"onednn=0,1 intra_op=2" -> [(("onednn", "0"), ("intra_op", "2")), (("onednn", "1"), ("intra_op", "2"))]:
    every combination, in the order given ([] for no knobs)."""
    axes = []
    for item in (text or "").split():
        name, eq, values = item.partition("=")
        if name not in KNOBS:
            raise KnobError(f"KNOBS: unknown knob {name!r}; known: {', '.join(KNOBS)} (e.g. KNOBS=\"onednn=0,1\")")
        vals = values.split(",")
        if not eq or not values or "" in vals:
            raise KnobError(f"KNOBS: {item!r} needs values, one between each two commas, e.g. {name}=0,1")
        allowed = KNOBS[name][1]
        for v in vals:
            if allowed and v not in allowed:
                what = " or ".join(allowed) if len(allowed) <= 4 else f"{allowed[0]}..{allowed[-1]}"
                raise KnobError(f"KNOBS: {name} takes {what}, got {v!r}")
            if not allowed and not (v.isdigit() and 0 < int(v) <= 1024):
                raise KnobError(f"KNOBS: {name} takes thread counts 1..1024, got {v!r}")
        if len(set(vals)) != len(vals) or name in {a[0][0] for a in axes}:
            raise KnobError(f"KNOBS: {name} or one of its values is given twice in {text!r}")
        axes.append([(name, v) for v in vals])
    return list(itertools.product(*axes)) if axes else []


def label(knobs: tuple) -> str:
    """"onednn0-intra2", "jemalloc": what a variant's name adds to its version's."""
    return "-".join(f"{KNOBS[k][0]}{v}" for k, v in knobs)


def env(settings: tuple) -> dict:
    """The environment a variant's server and ceiling run with (settings: Version.knobs)."""
    out = {KNOBS[k][2][1]: v for k, v in settings if KNOBS[k][2][0] == "env"}
    out.update({KNOBS[k][2][1]: str(LIB_DIR / PRELOAD[v][0]) if v in PRELOAD else ""  # glibc: none inherited
                for k, v in settings if KNOBS[k][2][0] == "preload"})
    return out


def allocator(settings: tuple) -> str | None:
    """The variant's allocator ("glibc", "jemalloc", ...), or None where it is not a knob of the compare."""
    return next((v for k, v in settings if k == "malloc"), None)


def check_preload(settings: tuple, where: str = "this machine") -> None:
    """A preloaded allocator that is missing would make every process of the variant fail to start: one line now."""
    lib = PRELOAD.get(allocator(settings) or "")
    if lib and not (LIB_DIR / lib[0]).exists():
        raise KnobError(f"KNOBS: malloc={allocator(settings)} needs {LIB_DIR / lib[0]} on {where} "
                        f"(Debian: apt-get install {lib[1]})")


def flags(settings: tuple) -> list:
    """The TF Serving flags a variant's server runs with."""
    return [f"{KNOBS[k][2][1]}={BOOL_FLAGS.get(k, {}).get(v, v)}" for k, v in settings
            if KNOBS[k][2][0] in ("flag", "server_flag")]


def threads(settings: tuple) -> dict:
    """{"intra_op": n, "inter_op": n} of a variant (what the ceiling's Session gets as well)."""
    return {k: int(v) for k, v in settings if KNOBS[k][2][0] == "flag"}


def describe(settings: tuple) -> str:
    """"TF_ENABLE_ONEDNN_OPTS=0 --tensorflow_intra_op_parallelism=2" for the report."""
    return " ".join([f"{k}={v}" if v else f"{k} empty (glibc malloc)" for k, v in env(settings).items()]
                    + flags(settings))


def expand(registry, versions: list, text: str | None) -> tuple:
    """(registry with every variant, the variants in compare order: each version's combinations in turn).
    Without knobs, the registry and versions unchanged."""
    combos = parse(text)
    if not combos:
        return registry, versions
    for combo in combos:
        check_preload(combo)  # the ceiling runs it here, whatever runs the servers
    out, table = [], dict(registry.versions)
    taken = {p: v.name for v in registry.versions.values() for p in (v.ports.grpc, v.ports.rest)}
    for v in versions:
        for i, combo in enumerate(combos, 1):
            shift = PORT_STEP * i
            var = dataclasses.replace(v, name=f"{v.name}-{label(combo)}", family=v.key, knobs=combo,
                                      ports=dataclasses.replace(v.ports, grpc=v.ports.grpc + shift,
                                                                rest=v.ports.rest + shift))
            clash = [p for p in (var.ports.grpc, var.ports.rest) if p in taken]
            if clash:
                raise KnobError(f"KNOBS: {len(combos)} combinations are too many for {v.name}'s ports: "
                                f"{var.name} would take port {clash[0]} of {taken[clash[0]]}")
            taken.update({var.ports.grpc: var.name, var.ports.rest: var.name})
            table[var.name] = var
            out.append(var)
    return dataclasses.replace(registry, versions=table), out
