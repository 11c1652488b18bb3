"""Run a scenario's phases against every target at once, and return raw results.

Raw results hold exact HDR histograms (encoded) and counts per target and phase,
so results of several worker processes merge exactly (summary.merge_raw).
"""
from __future__ import annotations

import asyncio
import collections
import time

from loadgen import schedule
from loadgen.drivers import GrpcDriver, Phase, RestDriver
from loadgen.record import Recorder, encode_hdr, quantiles_ms


class LiveState:
    """What the Prometheus collector and the progress line read while a run goes on."""

    def __init__(self, run_id: str, scenario: str, mode: str):
        self.run_id, self.scenario, self.mode = run_id, scenario, mode
        self.phase = "starting"
        self.phase_marks = []        # [phase, start unix time, end unix time or None]
        self.offered = {}            # target name -> offered rate (open loop)
        self.achieved = {}           # target name -> completions/s over the last second
        self.loop_lag_s = 0.0
        self.valid = {}              # target name -> 1/0 once the run has ended


class Runner:
    def __init__(self, scenario, payloads: dict, rec: Recorder | None = None, live: LiveState | None = None,
                 progress=None, partial=None, boundary=None, history=None):
        """boundary(edge): called before the first phase ("start") and after each phase (its name),
        once nothing is in flight, so a caller can read the servers' own counters at exact edges."""
        self.s, self.rec = scenario, rec or Recorder()
        self.boundary, self.history = boundary, history  # history(rows): each second, for --csv
        self.aborted = ""  # the broken :abort threshold that ended the run early
        self.live = live or LiveState(scenario.run_id, scenario.name, scenario.load.mode)
        self.progress, self.partial = progress, partial
        self.drivers = {}
        for t in scenario.targets:
            reqs = payloads[t.name]
            if t.protocol == "rest":
                self.drivers[t.name] = RestDriver(t, reqs, self.rec, scenario.load.timeout,
                                                  scenario.load.max_connections, seed=scenario.load.seed)
            else:
                self.drivers[t.name] = GrpcDriver(t, reqs, self.rec, scenario.load.timeout, seed=scenario.load.seed)
        self.raw = {t.name: {"target": t, "phases": collections.OrderedDict()} for t in scenario.targets}
        self.phases = {}
        self.current = None
        self.scheduled = {}

    async def run(self) -> dict:
        self._task = asyncio.current_task()
        background = [asyncio.ensure_future(f()) for f in (self._sweeper, self._ticker, self._reporter)]
        started = time.time()
        try:
            if self.boundary:
                self.boundary("start")
            for i, (name, seconds, level) in enumerate(self.s.phases()):
                await self._phase(i, name, seconds, level)
                if self.boundary:
                    # An open loop's last requests of a phase are still out: let them finish, so the
                    # server has answered exactly what the client counts for this phase.
                    await self._drain(self.s.load.timeout + 1)
                    self.boundary(name)
            await self._drain(self.s.load.timeout + 1)
        finally:
            for task in background:
                task.cancel()
            for d in self.drivers.values():
                d.close()
        self.rec.flush()
        return self.raw_results(started, partial=False)

    async def _phase(self, index: int, name: str, seconds: float, level) -> None:
        live = self.live
        live.phase = name
        live.phase_marks.append([name, time.time(), None])
        phases = {t.name: Phase(self.rec, t, name) for t in self.s.targets}
        self.phases[name] = phases
        cpu0, t0 = time.process_time(), time.perf_counter()
        self.current = (name, t0, cpu0, level)
        self.phase_seconds = seconds
        deadline = t0 + seconds
        if self.s.load.mode == "closed":
            live.offered = {}
            await asyncio.gather(*(d.closed(phases[n], int(level), deadline, self.s.load.max_requests)
                                   for n, d in self.drivers.items()))
        else:
            live.offered = {n: float(level) for n in self.drivers}
            # A shard draws the whole schedule (level is the total rate) and sends its slice of it.
            total = float(level) * self.s.shard[1]
            await asyncio.gather(*(self._open(d, phases[n], schedule.chunks(
                self.s.load.mode, total, seconds, self.s.load.seed + index, tuple(self.s.shard)), t0, (name, n),
                seconds)
                for n, d in self.drivers.items()))
        elapsed = time.perf_counter() - t0
        cpu = (time.process_time() - cpu0) / max(elapsed, 1e-9)
        live.phase_marks[-1][2] = time.time()
        for n, p in phases.items():
            p.sent_in_window = p.sent
            self.raw[n]["phases"][name] = {"seconds": elapsed, "level": level, "cpu_ratio": cpu,
                                           "scheduled": self.scheduled.get((name, n), 0)}

    async def _open(self, driver, phase: Phase, chunks, t0: float, key: tuple, seconds: float) -> None:
        """Dispatch at the intended times, in ticks. The loop's timers have ~1 ms resolution, so rather
        than spin, every wake-up also sends what is due within the next `early` seconds: such a request
        is timed from its actual (earlier) send, never from its later intended time, so no latency is
        understated, and the offered rate over any window longer than a tick is unchanged. Waking at
        most every `tick` seconds keeps the scheduler's own cost per request small at high rates."""
        early, tick = 0.0005, 0.0005
        pending = collections.deque()
        lag = phase.lag
        perf = time.perf_counter
        for chunk in chunks:  # generated as consumed: memory stays bounded at any rate x duration
            offsets = chunk.tolist()  # Python floats: numpy scalar indexing costs ~100 ns a request
            self.scheduled[key] = self.scheduled.get(key, 0) + len(offsets)
            i, n = 0, len(offsets)
            while i < n:
                now = perf()
                horizon = now - t0 + early
                while i < n and offsets[i] <= horizon:
                    intended = t0 + offsets[i]
                    if intended <= now:
                        lag.record(now - intended)
                        driver.open_dispatch(phase, intended, pending)
                    else:
                        lag.record(0.0)
                        driver.open_dispatch(phase, now, pending)
                    i += 1
                if i < n:
                    await asyncio.sleep(max(tick, offsets[i] - early - (perf() - t0)))
        end = t0 + seconds  # the phase lasts its whole window, not just until its last arrival
        while perf() < end:
            await asyncio.sleep(min(0.05, max(0.0005, end - perf())))

    async def _drain(self, timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while any(d.in_flight for d in self.drivers.values()) and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)

    async def _sweeper(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            now = time.perf_counter()
            for d in self.drivers.values():
                d.sweep(now)

    async def _ticker(self) -> None:
        """Event-loop lag (how late a 100 ms timer fires) and a flush so scrapes stay fresh."""
        flush_every, last_flush = 0.5, time.perf_counter()
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.1)
            self.live.loop_lag_s = max(0.0, time.perf_counter() - t - 0.1)
            if time.perf_counter() - last_flush >= flush_every:
                self.rec.flush()
                last_flush = time.perf_counter()

    def _snapshot(self, last: dict) -> list:
        """One row per target of the phase going on: what the progress display, --csv and the :abort
        thresholds read each second (latency percentiles so far in the phase, rates of the last second)."""
        name = self.live.phase
        phases = self.phases.get(name, {})
        elapsed = time.perf_counter() - self.current[1] if self.current else 0.0
        rows = []
        for n, p in phases.items():
            p.ok.flush()
            p.err.flush()
            done = p.ok.count + p.err.count
            rate = max(0, done - last.get((name, n), 0))
            last[(name, n)] = done
            self.live.achieved[n] = rate
            rows.append({"time": time.time(), "phase": name, "target": n, "elapsed_s": elapsed,
                         "remaining_s": max(0.0, getattr(self, "phase_seconds", 0.0) - elapsed),
                         "target_rate": self.live.offered.get(n), "rate": rate, "completed": done, "ok": p.ok.count,
                         "errors": p.err.count, "error_ratio": p.err.count / done if done else 0.0,
                         "achieved_qps": p.ok.count / elapsed if elapsed else 0.0,
                         "latency_ms": quantiles_ms(p.ok.hdr)})
        return rows

    def _check_abort(self, rows: list) -> None:
        if self.live.phase == "warmup":
            return
        for r in rows:
            for t in self.s.thresholds.parsed:
                if t.abort and r["completed"] >= 10 and not t.holds(r):
                    self.aborted = f"{r['target']} {r['phase']}: {t.text} broken"
                    self._task.cancel()
                    return

    async def _reporter(self) -> None:
        last, tick, partial_every = {}, 0, 5
        while True:
            await asyncio.sleep(1.0)
            tick += 1
            rows = self._snapshot(last)
            if self.progress:
                self.progress(rows)
            if self.history:
                self.history(rows)
            self._check_abort(rows)
            if self.partial and tick % partial_every == 0:
                self.rec.flush()
                self.partial(self.raw_results(None, partial=True))

    def raw_results(self, started, partial: bool) -> dict:
        out = {"run_id": self.s.run_id, "partial": partial, "started": started, "targets": {},
               "phase_marks": [list(m) for m in self.live.phase_marks], "aborted": self.aborted}
        for n, r in self.raw.items():
            t = r["target"]
            phases = {}
            for name in list(self.phases):
                info = r["phases"].get(name)
                if info is None:  # the phase in progress (partial results only)
                    if not partial or self.current is None or self.current[0] != name:
                        continue
                    _, t0, cpu0, level = self.current
                    secs = time.perf_counter() - t0
                    info = {"seconds": secs, "level": level, "cpu_ratio": (time.process_time() - cpu0) / max(secs, 1e-9)}
                p = self.phases[name][n]
                if partial:
                    p.sent_in_window = p.sent
                errors = {k[-1]: v for k, v in self.rec.errors.items() if k[:3] == (t.version, t.protocol, name)}
                details = {k[-1]: v for k, v in self.rec.first_detail.items() if k[:3] == (t.version, t.protocol, name)}
                phases[name] = {**info, "ok_hdr": encode_hdr(p.ok.hdr), "lag_hdr": encode_hdr(p.lag.hdr),
                                "ok_sum_s": p.ok.sum, "errors": errors, "error_details": details,
                                "sent": p.sent_in_window}
            reconnects = getattr(self.drivers[n], "reconnects", 0)
            out["targets"][n] = {"version": t.version, "protocol": t.protocol, "address": f"{t.host}:{t.port}",
                                 "model": t.model, "phases": phases, "reconnects": reconnects}
        return out
