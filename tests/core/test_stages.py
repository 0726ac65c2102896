"""Pipeline.stats()["stages"]: per-stage worker time, wait fractions, verdict; the
TensorBoard callback of fastq.tf.  No assertion here depends on how fast anything ran."""
import glob
import os
import time

import numpy as np
import pytest

import fastq
from fastq import ops
from fastq.bench import testdata
from fastq.stages import STAGES, format_stages, stage_report

CHAIN = [ops.RandomResizedCrop(64), ops.HorizontalFlip(), ops.ColorJitter(0.2, 0.2, 0.2), ops.Normalize()]


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("stage_jpegs"))
    return testdata.make_jpeg_dataset(d, 48, seed=2, min_side=120, max_side=300)


def test_stage_times_are_counted_per_sample_and_per_source_kind(jpegs):
    with fastq.Pipeline(fastq.sources.Files(jpegs), batch_size=8, workers=2, ops=CHAIN, pin_memory=False) as p:
        rep = p.stats()["stages"]
        assert rep["verdict"] == "no epoch has run yet" and rep["timed_samples"] == 0
        t0 = time.monotonic()
        n = sum(b[0].shape[0] for b in p)
        wall = time.monotonic() - t0
        rep = p.stats()["stages"]
    assert n == 48 and rep["timed_samples"] == 48
    st = rep["stage_s"]
    assert set(st) == set(STAGES) and all(st[k] > 0 for k in STAGES)
    # each worker's stage time fits in the epoch's wall time
    assert sum(st.values()) <= 2 * wall + 0.05
    assert 0 < rep["active_s"] <= wall + 0.05
    assert 0 <= rep["worker_wait_fraction"] <= 1 and 0 <= rep["consumer_wait_fraction"] <= 1
    assert rep["verdict"].split(":")[0] in ("input-bound", "consumer-bound")
    lines = format_stages(rep)
    assert lines[-1] == rep["verdict"] and any(line.startswith("decode") for line in lines)

    # encoded bytes in memory: nothing is read from a file
    blobs = [open(f, "rb").read() for f in jpegs[:16]]
    with fastq.Pipeline(fastq.sources.Bytes(blobs), batch_size=8, workers=2, ops=CHAIN, pin_memory=False) as p:
        for _ in p:
            pass
        st = p.stats()["stages"]["stage_s"]
        assert st["read"] == 0 and st["decode"] > 0 and p.stats()["stages"]["timed_samples"] == 16

    # decoded arrays: neither read nor decode
    arrays = [np.full((40 + i, 50, 3), i, np.uint8) for i in range(8)]
    with fastq.Pipeline(fastq.sources.Arrays(arrays), batch_size=4, workers=1, ops=CHAIN, pin_memory=False) as p:
        for _ in p:
            pass
        st = p.stats()["stages"]["stage_s"]
        assert st["read"] == 0 and st["decode"] == 0 and st["ops"] > 0 and st["write"] > 0


def test_stage_times_accumulate_over_epochs_and_count_skipped_attempts(jpegs, tmp_path):
    bad = testdata.make_bad_files(str(tmp_path))
    files = jpegs[:15] + [bad["garbage"]]
    with fastq.Pipeline(fastq.sources.Files(files), batch_size=4, workers=2, ops=CHAIN, on_error="skip",
                        pin_memory=False) as p:
        for _ in p:
            pass
        first = p.stats()["stages"]
        for _ in p:
            pass
        second = p.stats()["stages"]
        skipped = p.stats()["skipped"]
    assert skipped == 2  # the garbage file, once per epoch
    assert first["timed_samples"] == 16 + 1 and second["timed_samples"] == 2 * 17  # + 1 replacement each
    assert all(second["stage_s"][k] >= first["stage_s"][k] for k in STAGES)
    assert second["active_s"] > first["active_s"]


def test_python_iterable_sources_have_waits_but_no_stage_times():
    with fastq.Pipeline(({"x": np.zeros(3, np.float32)}["x"] for _ in range(20)), batch_size=5,
                        pin_memory=False) as p:
        for _ in p:
            pass
        rep = p.stats()["stages"]
    assert rep["stage_s"] is None and rep["consumer_wait_fraction"] is not None


def test_verdict_compares_who_waits_on_whom():
    base = {"workers": 4, "stage_s": {"read": 1.0, "decode": 6.0, "ops": 2.0, "write": 1.0}, "timed_samples": 100}
    inp = stage_report(dict(base, producer_wait_s=0.4, consumer_wait_s=3.0), active_s=10.0)
    assert inp["worker_wait_fraction"] == pytest.approx(0.01) and inp["consumer_wait_fraction"] == pytest.approx(0.3)
    assert inp["verdict"].startswith("input-bound: the consumer waits 30 %")
    assert "decode takes 60 %" in inp["verdict"]
    cons = stage_report(dict(base, producer_wait_s=20.0, consumer_wait_s=0.2), active_s=10.0)
    assert cons["verdict"] == ("consumer-bound: the model waits 2 % of the time for input; the workers wait "
                               "50 % of theirs for a free slot")
    assert stage_report(dict(base, producer_wait_s=0, consumer_wait_s=0), active_s=0)["verdict"] == \
        "no epoch has run yet"


@pytest.mark.tf
def test_tensorboard_callback_logs_the_stages(jpegs, tmp_path):
    import tensorflow as tf
    import fastq.tf as fqtf
    p = fastq.Pipeline(fastq.sources.Files(jpegs[:32], list(range(32))), batch_size=8, workers=2,
                       ops=[ops.RandomResizedCrop(32), ops.Normalize()], pin_memory=False)
    ds = fqtf.dataset(p).map(lambda x, y: (x, tf.cast(y % 2, tf.float32)))
    model = tf.keras.Sequential([tf.keras.Input((32, 32, 3)), tf.keras.layers.GlobalAveragePooling2D(),
                                 tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    logdir = str(tmp_path / "tb")
    cb = fqtf.stage_stats_callback(p, logdir, every_n_batches=2)
    model.fit(ds, epochs=2, verbose=0, callbacks=[cb])
    final = p.stats()["stages"]
    p.close()
    seen = {}
    for f in glob.glob(os.path.join(logdir, "events.out.tfevents.*")):
        for ev in tf.compat.v1.train.summary_iterator(f):
            for v in ev.summary.value:
                seen.setdefault(v.tag, []).append((ev.step, tf.make_ndarray(v.tensor)))
    for k in STAGES:
        assert f"fastq/stage_s/{k}" in seen
    steps = [s for s, _ in seen["fastq/stage_s/decode"]]
    assert steps == sorted(steps) and steps[-1] == 8 and 2 in steps  # 4 batches x 2 epochs, every 2 batches
    decode = [float(v) for _, v in seen["fastq/stage_s/decode"]]
    assert decode == sorted(decode) and 0 < decode[-1] <= final["stage_s"]["decode"] * (1 + 1e-6)  # float32 summary
    for k in ("worker_wait_fraction", "consumer_wait_fraction"):
        assert all(0 <= float(v) <= 1 for _, v in seen[f"fastq/{k}"])
    verdicts = [v.item().decode() for _, v in seen["fastq/verdict"]]
    assert verdicts[-1].split(":")[0] in ("input-bound", "consumer-bound")
