"""Server-side batching: concurrent requests are merged, rows go back to their owners,
the queue is bounded and overflow answers 503 as TF Serving does."""
import asyncio

import aiohttp
import numpy as np
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from servers import CONFIGS, TEST_VERSIONS, start_modelserver

from stack import counters

pytestmark = pytest.mark.integration


async def _fire(url: str, bodies: list) -> list:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=len(bodies))) as s:
        async def one(body):
            async with s.post(url, json=body) as r:
                return r.status, await r.json()
        return await asyncio.gather(*(one(b) for b in bodies))


BATCH_SIZE = ":tensorflow:serving:batching_session:processed_batch_size"


def _check_batch_size_family(server) -> None:
    """processed_batch_size as TF Serving of that release exports it (batching_util.h): a Sampler
    histogram with buckets 1, 2, 4 ... 8192 and no labels from 2.10; before, a PercentileSampler,
    which the exporter prints as one counter-typed 0 with no _sum or _count."""
    text = requests.get(server.url("/monitoring/prometheus/metrics"), timeout=5).text
    fam = {f.name: f for f in text_string_to_metric_families(text)}[BATCH_SIZE]
    if tuple(map(int, server.version.split(".")[:2])) >= (2, 10):
        assert fam.type == "histogram"
        les = [s.labels["le"] for s in fam.samples if s.name.endswith("_bucket")]
        assert les == [str(2 ** i) for i in range(14)] + ["+Inf"]
        assert all(set(s.labels) <= {"le"} for s in fam.samples)
    else:
        assert fam.type == "counter" and [(s.labels, s.value) for s in fam.samples] == [({}, 0.0)]
        assert f"# TYPE {BATCH_SIZE} counter\n{BATCH_SIZE}{{}} 0\n" in text and BATCH_SIZE + "_sum" not in text


@pytest.fixture(scope="module", params=TEST_VERSIONS, ids=lambda v: f"tf{v}")
def batching_server(request, tmp_path_factory):
    s = start_modelserver(request.param, tmp_path_factory.mktemp("batch"), batching=CONFIGS / "batching.config")
    yield s
    s.stop()


def test_concurrent_requests_are_merged_and_rows_return_to_their_owner(batching_server, reference):
    xs = np.random.RandomState(11).rand(64, 2, 784).astype(np.float32)  # 64 requests of 2 rows each
    bodies = [{"instances": x.tolist()} for x in xs]
    url = batching_server.url("/monitoring/prometheus/metrics")
    before = counters.read(url)
    results = asyncio.run(_fire(batching_server.url("/v1/models/my_model:predict"), bodies))
    assert all(status == 200 for status, _ in results)
    want = reference(batching_server.base_path, xs.reshape(-1, 784)).reshape(64, 2, 10)
    for i, (_, body) in enumerate(results):
        np.testing.assert_allclose(np.asarray(body["predictions"]), want[i], atol=1e-6)
    _check_batch_size_family(batching_server)
    d = counters.delta(before, counters.read(url))
    assert d["requests_ok"] == 64
    if d["batch_histogram"]:
        assert d["batch_rows_sum"] == 128  # every row went through the batcher
    # requests of 2 rows were merged: batches hold more than one request, whichever way the mean is read
    assert counters.mean_batch(d, rows_per_request=2) > 2, (d, counters.mean_batch_source(d))


def test_task_larger_than_max_batch_size_is_rejected(batching_server):
    x = np.zeros((33, 784), np.float32)
    r = requests.post(batching_server.url("/v1/models/my_model:predict"), json={"instances": x.tolist()}, timeout=10)
    assert r.status_code == 400
    assert "larger than maximum input batch size 32" in r.json()["error"]


def test_full_queue_answers_503_and_server_recovers(tmp_path):
    cfg = tmp_path / "tiny_queue.config"
    cfg.write_text("max_batch_size { value: 1 }\nbatch_timeout_micros { value: 0 }\n"
                   "num_batch_threads { value: 1 }\nmax_enqueued_batches { value: 1 }\n")
    s = start_modelserver(TEST_VERSIONS[0], tmp_path, batching=cfg)
    try:
        x = np.random.RandomState(1).rand(1, 784).astype(np.float32).tolist()
        results = asyncio.run(_fire(s.url("/v1/models/my_model:predict"), [{"instances": x}] * 96))
        codes = [c for c, _ in results]
        assert codes.count(200) >= 1
        assert codes.count(503) >= 1, codes
        assert all(c in (200, 503) for c in codes)
        full = [b["error"] for c, b in results if c == 503]
        assert all("queue" in e and "full" in e for e in full)
        ok = requests.post(s.url("/v1/models/my_model:predict"), json={"instances": x}, timeout=10)
        assert ok.status_code == 200
    finally:
        s.stop()
