"""Which model versions are served: version policy, polling, hot swap, labels.

Like TF Serving's availability-preserving policy, a new version is loaded and
warmed up before the old one is unloaded, so requests never meet an empty model.
An unloaded servable is only dropped from the map; requests in flight keep their
reference and finish on it.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import re
import time

from modelserver.status import ServingError, not_found

log = logging.getLogger("modelserver")


class ModelPathError(ValueError):
    """A model base path that cannot be served (startup error)."""


@dataclasses.dataclass
class ModelSpec:
    name: str
    base_path: str
    policy: str = "latest"          # latest | all | specific
    num_versions: int = 1
    specific: tuple = ()
    labels: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_proto(cls, cfg) -> "ModelSpec":
        which = cfg.model_version_policy.WhichOneof("policy_choice") or "latest"
        pol = cfg.model_version_policy
        return cls(cfg.name, cfg.base_path, which,
                   num_versions=(pol.latest.num_versions or 1) if which == "latest" else 1,
                   specific=tuple(pol.specific.versions) if which == "specific" else (),
                   labels=dict(cfg.version_labels))


@dataclasses.dataclass
class VersionState:
    version: int
    state: str = "START"  # START LOADING AVAILABLE UNLOADING END (TF Serving's ManagerState)
    error: str = ""
    servable: object = None
    attempts: int = 0          # failed loads so far
    retry_at: float = 0.0      # monotonic time of the next load attempt, while retrying


VERSION_DIR = re.compile(r"[0-9]+")  # ASCII digits only: "²".isdigit() is True, int("²") fails


def is_saved_model_dir(path: str) -> bool:
    return any(os.path.isfile(os.path.join(path, f)) for f in ("saved_model.pb", "saved_model.pbtxt"))


def version_dirs(base_path: str) -> dict:
    """{version number: directory name} as TF Serving reads a base path: a directory whose name
    is a number is that version ("00000123" is 123; the name on disk is kept for its path), any
    other name is ignored, and a directory without a SavedModel yet (still being copied) too."""
    try:
        names = sorted(os.listdir(base_path))
    except OSError:
        return {}
    out = {}
    for n in names:
        if VERSION_DIR.fullmatch(n) and is_saved_model_dir(os.path.join(base_path, n)):
            out.setdefault(int(n), n)
    return out


def list_versions(base_path: str) -> list:
    return sorted(version_dirs(base_path))


def check_base_path(spec: ModelSpec) -> None:
    if not os.path.isdir(spec.base_path):
        raise ModelPathError(f"model {spec.name!r}: base path {spec.base_path} is not a directory")
    if is_saved_model_dir(spec.base_path):
        raise ModelPathError(f"model {spec.name!r}: {spec.base_path} is itself a SavedModel; "
                             f"TF Serving expects numbered version directories, e.g. {spec.base_path}/1/")
    if not list_versions(spec.base_path):
        raise ModelPathError(f"model {spec.name!r}: no SavedModel under {spec.base_path} "
                             "(expected <base_path>/<version number>/saved_model.pb)")


def aspired(spec: ModelSpec, on_disk: list) -> list:
    if spec.policy == "all":
        return list(on_disk)
    if spec.policy == "specific":
        return [v for v in on_disk if v in spec.specific]
    return on_disk[-spec.num_versions:]


class ModelManager:
    def __init__(self, specs: list, metrics, warmup: bool = True, poll_wait_s: int = 1, executor=None,
                 max_load_retries: int = 5, retry_interval_s: float = 60.0, session_config=None,
                 parallel_loads: int = 0):
        self.specs = {s.name: s for s in specs}
        self.states = {s.name: {} for s in specs}
        self.metrics, self.warmup, self.poll_wait_s, self.executor = metrics, warmup, poll_wait_s, executor
        self.max_load_retries, self.retry_interval_s = max_load_retries, retry_interval_s
        self.session_config = session_config
        self.parallel_loads = parallel_loads  # --num_load_threads: 0, one load after another
        self._task = self.loop = None

    def _retrying(self) -> list:
        return [st for vs in self.states.values() for st in vs.values() if st.state == "LOADING" and st.retry_at]

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        for spec in self.specs.values():
            check_base_path(spec)
        await self.poll_once()
        while self._retrying():  # as TF Serving does, startup waits for the initial loads' retries
            await asyncio.sleep(max(0.0, min(st.retry_at for st in self._retrying()) - time.monotonic()))
            await self.poll_once()
        failed = [f"{n}: {st.error}" for n, vs in self.states.items() for st in vs.values() if st.state == "END"]
        if not any(st.state == "AVAILABLE" for vs in self.states.values() for st in vs.values()):
            raise ModelPathError("no model version could be loaded: " + "; ".join(failed))
        if self.poll_wait_s > 0:
            self._task = asyncio.ensure_future(self._poll_forever())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(self.poll_wait_s)
            try:
                await self.poll_once()
            except Exception:  # a poll must never kill the server; the next poll retries
                log.exception("polling model base paths failed")

    async def poll_once(self) -> None:
        """Load every aspired version not loaded yet (one after another, or --num_load_threads at a time), then
        unload what is no longer aspired, per model, once something newer serves."""
        wants, loads = {}, []
        for name, spec in list(self.specs.items()):  # a reload may replace the dict meanwhile
            states = self.states.get(name)
            if states is None:
                continue
            on_disk = version_dirs(spec.base_path)
            wants[name] = want = aspired(spec, sorted(on_disk))
            for v in want:
                st = states.get(v)
                if st is not None and (st.state in ("AVAILABLE", "END") or (st.state == "LOADING" and (
                        not st.retry_at or st.retry_at > time.monotonic()))):
                    continue  # served, given up on, being loaded, or not due for a retry yet
                if st is None:
                    st = states[v] = VersionState(v, "LOADING")
                st.state, st.retry_at = "LOADING", 0.0
                loads.append((name, st, os.path.join(spec.base_path, on_disk[v])))
        if self.parallel_loads > 1:  # the pool's size bounds how many run at once
            await asyncio.gather(*(self._load(*job) for job in loads))
        else:
            for job in loads:
                await self._load(*job)
        for name, want in wants.items():
            states = self.states.get(name)
            if states is None or not any(states[v].state == "AVAILABLE" for v in want if v in states):
                continue  # keep what serves until something newer is available
            for v, st in list(states.items()):
                if v not in want and st.state == "AVAILABLE":
                    st.state, st.servable = "END", None
                    log.info("unloaded %s version %d", name, v)

    async def _load(self, name: str, st: VersionState, path: str) -> None:
        from modelserver.servable import load_servable  # imports TensorFlow: not before flags are checked

        v = st.version
        try:
            servable, load_s, warm_s = await asyncio.get_running_loop().run_in_executor(
                self.executor, load_servable, name, v, path, self.warmup, self.session_config,
                self.metrics.graph_built)
        except Exception as e:  # noqa: BLE001 - a bad version must not take the server down
            st.error = (str(e).strip().splitlines() or [type(e).__name__])[0]
            st.attempts += 1
            self.metrics.model_loaded(path, ok=False, load_s=0.0, warmup_s=0.0)
            if st.attempts > self.max_load_retries:
                st.state = "END"
                log.error("failed to load %s version %d, giving up after %d attempts: %s", name, v,
                          st.attempts, st.error)
            else:  # TF Serving's --max_num_load_retries / --load_retry_interval_micros
                st.retry_at = time.monotonic() + self.retry_interval_s
                log.warning("failed to load %s version %d (attempt %d of %d), retrying in %gs: %s", name, v,
                            st.attempts, self.max_load_retries + 1, self.retry_interval_s, st.error)
            return
        st.servable, st.state = servable, "AVAILABLE"
        self.metrics.model_loaded(path, ok=True, load_s=load_s, warmup_s=warm_s)
        log.info("loaded %s version %d in %.2fs (warmup %.2fs)", name, v, load_s, warm_s)

    async def reload(self, specs: list) -> None:
        """Serve exactly these models from now on (a changed models.config, HandleReloadConfigRequest):
        new ones are loaded, removed ones unloaded (requests in flight keep their servable and finish),
        kept ones take their new policy and labels. Every base path is checked before anything
        changes; the dicts are replaced, never resized, so other threads may read them meanwhile."""
        for spec in specs:
            check_base_path(spec)
        new = {s.name: s for s in specs}
        for name in set(self.specs) - set(new):
            for st in self.states[name].values():
                st.state, st.servable = "END", None
            log.info("unloaded model %s (no longer in the config)", name)
        self.states = {**{n: vs for n, vs in self.states.items() if n in new}, **{n: {} for n in new if
                                                                                 n not in self.states}}
        self.specs = new
        await self.poll_once()

    def reload_blocking(self, specs: list, timeout_s: float = 300) -> None:
        """reload() from another thread (the gRPC handler), on the manager's event loop."""
        asyncio.run_coroutine_threadsafe(self.reload(specs), self.loop).result(timeout_s)

    def label_version(self, name: str, label: str) -> int:
        """The version a label of model_config_list's version_labels names."""
        if name not in self.specs:
            raise not_found(f"Could not find any versions of model {name}")
        if label not in self.specs[name].labels:
            raise ServingError("INVALID_ARGUMENT", f"Unrecognized servable version label: {label}")
        return self.specs[name].labels[label]

    def resolve(self, name: str, version: int | None = None, label: str | None = None):
        if name not in self.specs:
            raise not_found(f"Servable not found for request: Latest({name})")
        states = self.states.get(name, {})
        if label is not None:
            version = self.label_version(name, label)
        if version is not None:
            st = states.get(version)
            if st is None or st.state != "AVAILABLE":
                raise not_found(f"Servable not found for request: Specific({name}, {version})")
            return st.servable
        live = [v for v, st in list(states.items()) if st.state == "AVAILABLE"]
        if not live:
            raise not_found(f"Servable not found for request: Latest({name})")
        return states[max(live)].servable

    def statuses(self, name: str, version: int | None = None) -> list:
        if name not in self.specs:
            raise not_found(f"Could not find any versions of model {name}")
        states = self.states.get(name, {})
        if version is not None:
            if version not in states:
                raise not_found(f"Could not find version {version} of model {name}")
            return [states[version]]
        snapshot = dict(states)  # copied at once: another thread may be adding a version
        if not snapshot:
            raise not_found(f"Could not find any versions of model {name}")
        return [snapshot[v] for v in sorted(snapshot, reverse=True)]
