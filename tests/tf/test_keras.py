"""Keras model.fit over fastq.tf.dataset: known cardinality (progress with a total,
no "ran out of data" warning), validation/evaluate/predict, dtypes given as TF
dtypes, and MirroredStrategy epochs with fastq.tf.EpochSync (issue 13)."""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

import fastq  # noqa: E402
import fastq.tf as fqtf  # noqa: E402
from helpers.native_helpers import slot_addresses  # noqa: E402

pytestmark = pytest.mark.tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.RandomState(0)
IMGS = RNG.randint(0, 256, (48, 16, 16, 3), np.uint8)
LABELS = RNG.randint(0, 3, 48)


def pipe(**kw):
    kw.setdefault("batch_size", 8)
    kw.setdefault("workers", 1)
    return fastq.Pipeline(fastq.sources.Arrays(IMGS, LABELS), **kw)


def model():
    m = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Conv2D(4, 3), keras.layers.GlobalAveragePooling2D(),
                          keras.layers.Dense(3)])
    m.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


class Steps(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.targets, self.done = [], []

    def on_epoch_begin(self, epoch, logs=None):
        self.targets.append(self.params.get("steps"))  # the progress bar's total
        self.done.append(0)

    def on_train_batch_end(self, batch, logs=None):
        self.done[-1] += 1


def test_fit_three_epochs_knows_its_length_and_does_not_warn():
    p, pv = pipe(shuffle=True), pipe(batch_size=12)
    ds = fqtf.dataset(p)
    assert int(ds.cardinality()) == len(p) == 6 and len(ds) == 6
    steps = Steps()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        hist = model().fit(ds, epochs=3, validation_data=fqtf.dataset(pv), verbose=0, callbacks=[steps],
                           shuffle=False)
    msgs = [str(x.message) for x in w]
    assert not [m for m in msgs if "ran out of data" in m], msgs
    assert steps.targets == [6, 6, 6]     # known from the first epoch on (was None: "N/Unknown")
    assert steps.done == [6, 6, 6]
    assert len(hist.history["loss"]) == 3 and len(hist.history["val_loss"]) == 3
    assert p.epoch == 3 and p.stats()["batches_delivered"] == 18
    assert p.state_dict()["epoch"] == 3 and p.state_dict()["position"] == 0
    assert pv.epoch == 3 and pv.stats()["batches_delivered"] == 12
    p.close()
    pv.close()


def test_evaluate_and_predict_with_a_partial_last_batch():
    m = model()
    pe = pipe(batch_size=10, drop_remainder=False)
    ds = fqtf.dataset(pe)
    assert int(ds.cardinality()) == 5
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m.evaluate(ds, verbose=0)
        out = m.predict(ds.map(lambda x, y: x), verbose=0)
    assert not [x for x in w if "ran out of data" in str(x.message)]
    assert out.shape == (48, 3)
    pe.close()


def test_cardinality_of_iterable_sources():
    samples = [(np.full((4,), i, np.float32), np.int64(i)) for i in range(10)]
    with fastq.Pipeline(samples, batch_size=3) as p:
        assert int(fqtf.dataset(p).cardinality()) == 3
    with fastq.Pipeline((s for s in samples), batch_size=3) as p:  # no __len__: unknown
        ds = fqtf.dataset(p)
        assert int(ds.cardinality()) == tf.data.UNKNOWN_CARDINALITY
        assert len([b for b in ds]) == 3


def test_cardinality_that_does_not_hold_fails_clearly():
    class Liar:
        def __len__(self):
            return 12

        def __iter__(self):
            return iter([(np.zeros(2, np.float32),)] * 6)

    with fastq.Pipeline(Liar(), batch_size=3) as p:
        ds = fqtf.dataset(p)
        assert int(ds.cardinality()) == 4
        with pytest.raises(tf.errors.OpError, match="expected to contain 4 elements but contained only 2"):
            for _ in ds:
                pass


def test_cardinality_option_and_a_pending_resume():
    p = pipe()
    assert int(fqtf.dataset(p, cardinality=None).cardinality()) == tf.data.UNKNOWN_CARDINALITY
    p.load_state_dict({"epoch": 0, "position": 2})
    ds = fqtf.dataset(p)                  # the next iteration is shorter: not declared
    assert int(ds.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    assert len(list(ds)) == 4
    with pytest.raises(ValueError, match="cardinality"):
        fqtf.dataset(p, cardinality=-3)
    p.close()


def test_tf_dtypes_and_bfloat16_through_tf_data():
    import ml_dtypes
    with pipe(dtype=tf.bfloat16, label_dtype=tf.int32, ops=[fastq.ops.Normalize()]) as p, \
            pipe(dtype=tf.float32, ops=[fastq.ops.Normalize()]) as ref:
        ds = fqtf.dataset(p)
        assert ds.element_spec[0].dtype == tf.bfloat16 and ds.element_spec[1].dtype == tf.int32
        ring_addrs = None
        for (x, y), (xr, yr) in zip(ds, ref):
            if ring_addrs is None:
                ring_addrs = slot_addresses(p, 0)
            a = np.asarray(x)
            assert a.ctypes.data in ring_addrs     # zero copy for bfloat16 too
            assert a.view(np.uint16).tobytes() == xr.astype(ml_dtypes.bfloat16).view(np.uint16).tobytes()
            assert y.dtype == tf.int32 and y.numpy().tolist() == yr.tolist()
            del x, y, a


def test_bfloat16_batches_train_a_mixed_precision_model():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        p = pipe(dtype="bfloat16", ops=[fastq.ops.Normalize()])
        m = model()
        hist = m.fit(fqtf.dataset(p), epochs=1, verbose=0, shuffle=False)
        assert np.isfinite(hist.history["loss"][0])
        p.close()
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.fixture(scope="module")
def strategy_results():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = os.pathsep.join([ROOT, os.path.join(ROOT, "tests"), env.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-m", "helpers.keras_strategy_scenario"],
                         capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return {r["name"]: r for r in (json.loads(line[7:]) for line in res.stdout.splitlines()
                                   if line.startswith("RESULT "))}


@pytest.mark.slow
def test_mirrored_strategy_probe_shifts_epochs_without_epochsync(strategy_results):
    # Keras opens an iterator under a strategy only to learn the input shapes: that
    # probe takes (and abandons) pipeline epoch 0, so training reads epochs 1, 2, 3.
    r = strategy_results["plain"]
    assert r["seen"] == {"0": [1], "1": [2], "2": [3]}
    assert r["epoch"] == 4 and r["delivered"] > 18


@pytest.mark.slow
def test_epochsync_keeps_pipeline_epochs_in_step_with_keras(strategy_results):
    r = strategy_results["sync"]
    assert r["seen"] == {"0": [0], "1": [1], "2": [2]}
    assert r["steps"] == {"0": 6, "1": 6, "2": 6}
    assert r["after"] == {"0": [1, 0], "1": [2, 0], "2": [3, 0]}   # state_dict: resume points right
    assert r["epoch"] == 3


@pytest.mark.slow
def test_epochsync_resumes_at_initial_epoch(strategy_results):
    r = strategy_results["resume"]
    assert r["seen"] == {"1": [1], "2": [2]}
    assert r["steps"] == {"1": 6, "2": 6}
    assert r["after"] == {"1": [2, 0], "2": [3, 0]}


def test_epochsync_needs_a_native_source():
    with fastq.Pipeline([np.zeros(2)] * 4, batch_size=2) as p:
        with pytest.raises(TypeError, match="native source"):
            fqtf.EpochSync(p)
