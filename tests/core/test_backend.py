"""The backend protocol (fastq.backend): a backend with only output_spec() and
start() feeds a Pipeline; the optional methods have the documented defaults."""
import threading

import numpy as np
import pytest

import fastq
from fastq.backend import Backend, BackendConfig
from fastq.sources import Source


class _Thread:
    def __init__(self, fn):
        self.t = threading.Thread(target=fn, daemon=True)
        self.t.start()

    def stop(self, timeout=None):
        self.t.join(timeout)


class _Counting(Backend):
    """Sample i is [i, 10 * i] (int32), n samples per epoch."""

    def __init__(self, config, n):
        self.config = config
        self.n = n
        self.workers = 1

    def output_spec(self):
        return [((2,), np.dtype(np.int32))]

    def start(self, ring, run_id, epoch, position=0):
        ring.set_end(self.n)
        rows = [[np.array([i, 10 * i], np.int32)] for i in range(self.n)]
        return _Thread(lambda: ring.put_many(run_id, 0, rows))


class _Src(Source):
    def __init__(self, n):
        self.n = n
        self.configs = []

    def _make_backend(self, config, **options):
        assert not options
        self.configs.append(config)
        return _Counting(config, self.n)


def test_a_backend_with_only_the_required_methods_feeds_a_pipeline():
    src = _Src(5)
    with fastq.Pipeline(src, batch_size=2, queue_size=4, workers=3, drop_remainder=False) as p:
        got = [b[0].copy() for b in p]
        (c,) = src.configs
        assert c == BackendConfig(batch_size=2, drop_remainder=False, workers=3, scheduling=c.scheduling)
        assert c.scheduling.name == "background"  # how native workers would be scheduled
        assert p.stats()["workers"] == 1  # the backend's own thread count
        with pytest.raises(TypeError, match="explain"):
            p.explain(0, 0)
        with pytest.raises(TypeError, match="rewound"):  # batches_per_epoch() is None: no resume
            p.load_state_dict({"epoch": 0, "position": 1})
    assert [g.tolist() for g in got] == [[[0, 0], [1, 10]], [[2, 20], [3, 30]], [[4, 40]]]


def test_output_spec_and_start_are_required():
    class Half(Backend):
        def output_spec(self):
            return []

    with pytest.raises(TypeError, match="start"):
        Half()


def test_defaults_of_the_optional_methods():
    b = _Counting(BackendConfig(2, False, None), 3)
    assert b.discover() is True and b.batches_per_epoch() is None and b.stats() == {}
    e = ValueError("x")
    assert b.sample_error(e, None) is e
