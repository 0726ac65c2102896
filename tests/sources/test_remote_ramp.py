"""The ramp of requests in flight (fastq.sources.fetch.Ramp, RemoteOptions.ramp): after a
pipeline's first request and after a pause, the client opens its connections a few at a
time, so a server with a short listen queue (Python's http.server: 5) does not drop
handshakes (TCP retries them after 1, 3, 7... s, and the batches waiting for them stall)."""
import os

import numpy as np
import pytest

import fastq
from fastq import ops
from fastq.bench import testdata
from fastq.sources.ramp import Ramp
from fastq.sources.storage import RemoteOptions

pytest.importorskip("obstore", reason="the cloud extra (obstore) is part of requirements-dev.txt")
from helpers.plain_servers import StdlibServer  # noqa: E402


def test_ramp_limits_by_time_and_by_requests_ended():
    r = Ramp(RemoteOptions(max_in_flight=64))
    t = 100.0
    assert r.limit(t) == Ramp.START and r.ramps == 1          # the first request starts a ramp
    for _ in range(4):
        r.started()
    assert r.limit(t + 1.0) == Ramp.START                      # time alone does not open more
    r.ended(t + 0.02)
    r.ended(t + 0.02)
    assert r.limit(t + 0.02) == Ramp.START + 2                 # one more per request that ended
    for _ in range(70):
        r.started()
        r.ended(t + 0.035)
    r.started()                                                # (3 in flight: no pause)
    assert r.limit(t + 0.035) == Ramp.START + 3 * Ramp.START   # at most START more per tick
    assert r.limit(t + 0.5) == 64 and not r.ramping            # open: max_in_flight from now on
    for _ in range(3):
        r.ended(t + 0.6)
    assert r.inflight == 0 and r.limit(t + 0.6 + Ramp.PAUSE_S / 2) == 64   # a short pause: still open
    assert r.limit(t + 0.61 + Ramp.PAUSE_S) == Ramp.START and r.ramps == 2  # a pause: a new ramp


def test_ramp_off_is_max_in_flight_at_once():
    r = Ramp(RemoteOptions(max_in_flight=64, ramp=False))
    assert r.limit(0.0) == 64 and r.ramps == 0
    with pytest.raises(ValueError, match="ramp"):
        RemoteOptions(ramp=1)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("ramp")
    jpegs = testdata.make_jpeg_dataset(str(root / "img"), 96, seed=3, min_side=40, max_side=64)
    return str(root), jpegs


@pytest.mark.parametrize("ramp,client", [(True, "obstore"), (False, "obstore"), (True, "native"), (False, "native")])
def test_server_sees_a_few_requests_before_its_first_answer(data, tmp_path, monkeypatch, ramp, client):
    """At 50 ms per answer, the requests the server holds before it has sent any answer are
    what the client opened at once: START with the ramp, many more without through obstore
    (which is what a listen queue of 5 drops).  fastq's own client keeps at most 4 new
    connections unanswered whatever the ramp (csrc/net/internal/fq_http_pool.h, MAX_UNCONFIRMED).  The batches equal
    local ones either way."""
    monkeypatch.setenv("HOME", str(tmp_path))
    root, jpegs = data
    labels = list(range(len(jpegs)))
    chain = [ops.RandomResizedCrop(32)]
    with fastq.Pipeline(fastq.sources.Files(jpegs, labels), batch_size=16, workers=2, seed=1, ops=chain) as p:
        local = [np.array(b[0]) for b in p]
    with StdlibServer(root, latency_s=0.05) as srv:
        src = fastq.sources.Files([srv.url(f"img/{os.path.basename(j)}") for j in jpegs], labels,
                                  remote=RemoteOptions(ramp=ramp, timeout_s=10.0, http_client=client))
        srv.quiet()
        with fastq.Pipeline(src, batch_size=16, workers=2, seed=1, ops=chain) as p:
            got = [np.array(b[0]) for b in p]
            st = p.stats()["remote"]
        c = srv.counts()
    assert len(got) == len(local) and all((a == b).all() for a, b in zip(got, local))
    assert st["http_client"] == client
    if ramp:
        assert c["max_concurrent_before_first_answer"] <= Ramp.START, c
        assert st["ramps"] == 1, st
    else:
        assert st["ramps"] == 0, st
        if client == "obstore":
            assert c["max_concurrent_before_first_answer"] > Ramp.START, c
        else:
            # at most 4 unanswered (the pool's MAX_UNCONFIRMED), counted by the server until its first
            # answer is complete, while the pool frees a slot at that answer's first byte: a few more
            assert c["max_concurrent_before_first_answer"] <= 8, c
