"""What to run: targets, load model, payload, thresholds. From flags or a YAML file.

Every field is checked when the scenario is built, so a bad file is one clear
line before any request is sent (ScenarioError -> exit 2).

    targets:
      - {version: "2.9", protocol: rest, address: "127.0.0.1:8591"}
    load: {mode: poisson, rate: 500, duration: 60s, warmup: 5s}
"""
from __future__ import annotations

import dataclasses
import math
import re
from core.errors import UsageError


MODES = ("closed", "constant", "poisson")
MAX_CONCURRENCY = 10_000  # users (connections) of one process; each costs a socket and some memory
PROTOCOLS = ("rest", "grpc")
FORMATS = ("row", "columnar")


class ScenarioError(UsageError):
    """A scenario a user wrote wrongly; the message says which field and why."""


# Every duration (windows, warm-up, timeouts, linger) at most a day: bounded loops stop by themselves.
MAX_DURATION_S = 24 * 3600.0
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ms|us|h|m|s)")
_UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def parse_duration(value, field: str) -> float:
    """"60s", "2m", "1m30s", "1h2m3s", "500ms" or a number of seconds -> seconds."""
    if isinstance(value, bool):
        raise ScenarioError(f"{field}: expected a duration like 30s, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = str(value).strip().replace(" ", "")
        sign = -1.0 if text.startswith("-") else 1.0
        text = text.lstrip("+-")
        if re.fullmatch(r"[0-9]*\.?[0-9]+", text):
            seconds = sign * float(text)
        elif text and re.fullmatch(f"(?:{_DURATION_PART.pattern})+", text):
            seconds = sign * sum(float(n) * _UNIT_S[u] for n, u in _DURATION_PART.findall(text))
        else:
            raise ScenarioError(f"{field}: expected a duration like 30s, 1m30s or 500ms, got {value!r}")
    if not math.isfinite(seconds):  # YAML's .inf/.nan: a load loop must end, a timeout must compare
        raise ScenarioError(f"{field}: must be a finite duration, got {value!r}")
    if seconds < 0:
        raise ScenarioError(f"{field}: must not be negative, got {value!r}")
    if seconds > MAX_DURATION_S:
        raise ScenarioError(f"{field}: must be at most {MAX_DURATION_S / 3600:g}h, got {value!r}")
    return seconds


def _number(value, field: str, *, integer: bool = False, positive: bool = True, allow_zero: bool = False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not float(value).is_integer()):
        kind = "an integer" if integer else "a number"
        raise ScenarioError(f"{field}: expected {kind}, got {value!r}")
    if not math.isfinite(value):
        raise ScenarioError(f"{field}: must be a finite number, got {value!r}")
    if positive and (value < 0 or (value == 0 and not allow_zero)):
        raise ScenarioError(f"{field}: must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return int(value) if integer else float(value)


@dataclasses.dataclass
class Target:
    version: str
    protocol: str
    host: str
    port: int
    model: str = "my_model"
    signature: str = "serving_default"
    format: str = "row"
    model_version: int | None = None

    @property
    def name(self) -> str:
        return f"{self.version}/{self.protocol}"


@dataclasses.dataclass
class Load:
    mode: str = "closed"
    concurrency: int = 8
    rate: float = 0.0
    steps: list = dataclasses.field(default_factory=list)  # rates (open) or concurrencies (closed)
    step_duration: float = 10.0
    duration: float = 30.0
    warmup: float = 2.0
    max_requests: int = 0          # 0: bounded by time only
    min_requests: int = 100
    min_duration: float = 1.0
    timeout: float = 5.0
    error_budget: float = 0.01     # a window with more failed requests than this share (or none ok) is invalid
    max_connections: int = 256
    seed: int = 1


@dataclasses.dataclass
class Payload:
    batch_size: int = 1
    seed: int = 1
    file: str = ""
    count: int = 64        # distinct requests, cycled in a seeded order (loadgen/requestset.py)
    api: str = "auto"      # predict, classify, regress, multi; auto: the signature's method
    model_dir: str = ""    # the SavedModel (base or version directory): the parse spec of tf.Example inputs
    requests_file: str = ""  # requests from a file: warmup, a TFRecord, JSON lines (loadgen/recordfile.py)


@dataclasses.dataclass
class Thresholds:
    max_p99_ms: float = 0.0        # 0: not checked (shorthand for "p99<=N ms")
    max_error_ratio: float = -1.0  # <0: not checked (shorthand for "error_ratio<=N")
    max_send_lag_p99_ms: float = 5.0
    criteria: list = dataclasses.field(default_factory=list)  # k6-style: ["p95<20ms", "error_ratio<0.01:abort"]
    parsed: list = dataclasses.field(default_factory=list)    # loadgen.thresholds.Threshold of all of them


@dataclasses.dataclass
class Scenario:
    targets: list
    load: Load
    payload: Payload = dataclasses.field(default_factory=Payload)
    thresholds: Thresholds = dataclasses.field(default_factory=Thresholds)
    name: str = "adhoc"
    run_id: str = ""
    metrics_port: int = 9464
    metrics_addr: str = "127.0.0.1"
    linger: float = 0.0
    workers: int = 1
    out: str = ""
    shard: tuple = (0, 1)  # (index, count): this process's share of a load split over processes or pods

    def phases(self) -> list:
        """[(phase name, seconds, rate or concurrency)], warmup first; excluded from results."""
        level = self.load.rate if self.load.mode != "closed" else self.load.concurrency
        out = [("warmup", self.load.warmup, level)] if self.load.warmup > 0 else []
        if self.load.steps:
            out += [(f"step{i + 1}", self.load.step_duration, s) for i, s in enumerate(self.load.steps)]
        else:
            out.append(("steady", self.load.duration, level))
        return out


def parse_target(spec: str, default_version: str = "") -> Target:
    """"rest://127.0.0.1:8591", "2.9=grpc://127.0.0.1:8590/my_model" -> Target."""
    m = re.fullmatch(r"(?:([\w.]+)=)?(rest|grpc)://([\w.\-]+|\[[0-9a-fA-F:]+\]):(\d+)(?:/([\w.\-]+))?", spec.strip())
    if not m:
        raise ScenarioError(f"target {spec!r}: expected [VERSION=]rest|grpc://HOST:PORT[/MODEL]")
    version = m.group(1) or default_version or "unknown"
    return check_target(Target(version, m.group(2), m.group(3).strip("[]"), int(m.group(4)),
                               m.group(5) or "my_model"), spec)


def check_target(t: Target, where: str) -> Target:
    if t.protocol not in PROTOCOLS:
        raise ScenarioError(f"{where}: protocol must be one of {', '.join(PROTOCOLS)}, got {t.protocol!r}")
    if t.format not in FORMATS:
        raise ScenarioError(f"{where}: format must be row or columnar, got {t.format!r}")
    if not isinstance(t.port, int) or not 0 < t.port < 65536:
        raise ScenarioError(f"{where}: port must be 1..65535, got {t.port!r}")
    if not re.fullmatch(r"[\w.\-]+", str(t.model)):
        raise ScenarioError(f"{where}: model name {t.model!r} may only hold letters, digits, '.', '_' and '-'")
    return t


def check(s: Scenario) -> Scenario:
    ld = s.load
    if not s.targets:
        raise ScenarioError("no target: give --target, --versions or targets: in the scenario file")
    if ld.mode not in MODES:
        raise ScenarioError(f"load.mode must be one of {', '.join(MODES)}, got {ld.mode!r}")
    if ld.mode == "closed":
        ld.concurrency = _number(ld.concurrency, "load.concurrency", integer=True)
    elif not ld.steps:
        ld.rate = _number(ld.rate, "load.rate")
    if not isinstance(ld.steps, list):
        raise ScenarioError(f"load.steps: expected a list, got {ld.steps!r}")
    ld.steps = [_number(x, f"load.steps[{i}]", integer=ld.mode == "closed") for i, x in enumerate(ld.steps)]
    for f in ("duration", "step_duration", "warmup", "timeout", "min_duration"):
        setattr(ld, f, parse_duration(getattr(ld, f), f"load.{f}"))
    if ld.mode != "closed":  # every open-loop rate bounded before a schedule is drawn
        from loadgen.schedule import check_rate

        try:
            for r in ld.steps or [ld.rate]:
                check_rate(r, "load.rate" if not ld.steps else "load.steps")
        except ValueError as e:
            raise ScenarioError(str(e)) from None
    if ld.mode == "closed" and max(ld.steps or [ld.concurrency]) > MAX_CONCURRENCY:
        raise ScenarioError(f"load.concurrency must be at most {MAX_CONCURRENCY} per process "
                            "(use --workers or shards), got " + str(max(ld.steps or [ld.concurrency])))
    if (ld.duration if not ld.steps else ld.step_duration) <= 0:
        raise ScenarioError("load.duration must be > 0" if not ld.steps else "load.step_duration must be > 0")
    if ld.timeout <= 0:
        raise ScenarioError("load.timeout must be > 0")
    ld.max_requests = _number(ld.max_requests, "load.max_requests", integer=True, allow_zero=True)
    ld.min_requests = _number(ld.min_requests, "load.min_requests", integer=True, allow_zero=True)
    ld.max_connections = _number(ld.max_connections, "load.max_connections", integer=True)
    ld.error_budget = _number(ld.error_budget, "load.error_budget", positive=False)
    if not 0 <= ld.error_budget <= 1:
        raise ScenarioError(f"load.error_budget must be a share of requests in 0..1, got {ld.error_budget:g}")
    s.payload.batch_size = _number(s.payload.batch_size, "payload.batch_size", integer=True)
    s.payload.count = _number(s.payload.count, "payload.count", integer=True)
    if s.payload.api not in ("auto", "predict", "classify", "regress", "multi"):
        raise ScenarioError(f"payload.api must be auto, predict, classify, regress or multi, got {s.payload.api!r}")
    s.workers = _number(s.workers, "workers", integer=True)
    s.linger = parse_duration(s.linger, "linger")
    th = s.thresholds
    th.max_p99_ms = _number(th.max_p99_ms, "thresholds.max_p99_ms", allow_zero=True)
    th.max_error_ratio = _number(th.max_error_ratio, "thresholds.max_error_ratio", positive=False)
    th.max_send_lag_p99_ms = _number(th.max_send_lag_p99_ms, "thresholds.max_send_lag_p99_ms")
    from loadgen.thresholds import ThresholdError, parse as parse_threshold

    if not isinstance(th.criteria, list) or not all(isinstance(c, str) for c in th.criteria):
        raise ScenarioError(f"thresholds.criteria: expected a list of expressions like 'p95<20ms', got {th.criteria!r}")
    implied = ([f"p99<={th.max_p99_ms:g}ms"] if th.max_p99_ms else []) + \
        ([f"error_ratio<={th.max_error_ratio:g}"] if th.max_error_ratio >= 0 else [])
    try:
        th.parsed = [parse_threshold(c) for c in implied + list(th.criteria)]
    except ThresholdError as e:
        raise ScenarioError(str(e)) from None
    if not isinstance(s.metrics_port, int) or not 0 <= s.metrics_port < 65536:
        raise ScenarioError(f"metrics_port must be 0..65535 (0: no endpoint), got {s.metrics_port!r}")
    return s


def _run_id(value, where: str) -> str:
    if value in ("", None):
        return ""
    from core.paths import check_name

    try:
        return check_name(value, "run_id")
    except ValueError as e:
        raise ScenarioError(f"{where}: {e}") from None


def _section(raw: dict, key: str, cls, where: str):
    data = raw.get(key) or {}
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: {key} must be a mapping")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ScenarioError(f"{where}: unknown {key} field(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(names))}")
    return cls(**data)


def _version_text(value, where: str) -> str:
    """A version as written: YAML reads 2.10 as the float 2.1, so a float is refused, not rounded."""
    if isinstance(value, float):
        raise ScenarioError(f"{where}: version {value!r} is a number; write it in quotes (\"2.10\" is not 2.1)")
    return str(value)


def load_file(path: str) -> Scenario:
    from core.safe_yaml import YamlError, load_path

    try:
        raw = load_path(path)
    except YamlError as e:
        raise ScenarioError(f"scenario {e}") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping with targets: and load:")
    known = {"targets", "load", "payload", "thresholds", "name", "run_id", "metrics_port", "linger", "workers", "out"}
    unknown = set(raw) - known
    if unknown:
        raise ScenarioError(f"{path}: unknown field(s) {', '.join(sorted(unknown))}")
    targets = []
    for i, t in enumerate(raw.get("targets") or []):
        where = f"{path}: targets[{i}]"
        if isinstance(t, str):
            targets.append(parse_target(t))
            continue
        if not isinstance(t, dict) or "address" not in t or "protocol" not in t:
            raise ScenarioError(f"{where}: needs protocol and address (HOST:PORT)")
        host, _, port = str(t.pop("address")).rpartition(":")
        if not port.isdigit() or not host:
            raise ScenarioError(f"{where}: address must be HOST:PORT")
        try:
            version = _version_text(t.get("version", "unknown"), where)
            targets.append(check_target(Target(host=host, port=int(port), **{**t, "version": version}), where))
        except TypeError as e:
            raise ScenarioError(f"{where}: {e}") from None
    load = _section(raw, "load", Load, path)
    if "mode" not in (raw.get("load") or {}) and (raw.get("load") or {}).get("rate") is not None:
        load.mode = "poisson"  # a rate means an open loop, as --rate does on the command line
    s = Scenario(targets=targets, load=load,
                 payload=_section(raw, "payload", Payload, path),
                 thresholds=_section(raw, "thresholds", Thresholds, path),
                 name=str(raw.get("name", path)), run_id=_run_id(raw.get("run_id", ""), path),
                 metrics_port=raw.get("metrics_port", 9464), linger=raw.get("linger", 0),
                 workers=raw.get("workers", 1), out=str(raw.get("out", "")))
    return check(s)
