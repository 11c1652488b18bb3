"""Which cores the load generator and the model servers run on.

A client that shares cores with the servers measures its own scheduling as much as theirs:
where the machine has at least 4 cores, the load generator gets a quarter of them (at least
one) and the model servers the rest, disjoint (`ISOLATE=0` turns it off). On fewer cores
nothing is pinned and the report says, in its first lines, that client and servers share.

    >>> plan(8, True)
    Placement(client=[0, 1], servers=[2, 3, 4, 5, 6, 7], isolated=True, reason='')
"""
from __future__ import annotations

import dataclasses
import os
from core import settings

MIN_CORES = 4


@dataclasses.dataclass(frozen=True)
class Placement:
    client: list
    servers: list
    isolated: bool
    reason: str  # why not isolated ("" when isolated)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def cpuset(cpus: list) -> str:
        """The cpuset string docker and taskset take: "2-7" or "0,2,5"."""
        runs, start = [], None
        for i, c in enumerate(cpus):
            if start is None:
                start = c
            if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
                runs.append(f"{start}-{c}" if c != start else str(c))
                start = None
        return ",".join(runs)


def available_cpus() -> list:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def plan(cpus: int | list | None = None, isolate: bool = True) -> Placement:
    cores = list(range(cpus)) if isinstance(cpus, int) else list(cpus or available_cpus())
    if not isolate:
        return Placement(cores, cores, False, "ISOLATE=0: isolation turned off")
    if len(cores) < MIN_CORES:
        return Placement(cores, cores, False, f"{len(cores)} cores (isolation needs at least {MIN_CORES})")
    k = max(1, len(cores) // 4)
    return Placement(cores[:k], cores[k:], True, "")


def isolate_from_env() -> bool:
    return settings.isolate()


def pin_self(cpus: list) -> None:
    """Pin this process (and the threads it starts from now on) to cpus."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)


def pin_child(cpus: list):
    """A preexec_fn for subprocess.Popen: the child runs on cpus from its first instruction,
    so every thread TensorFlow starts inherits the set."""
    def apply():
        os.sched_setaffinity(0, cpus)
    return apply if hasattr(os, "sched_setaffinity") else None
