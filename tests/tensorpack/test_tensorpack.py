"""fastq.tensorpack.QueueInput in a tensorpack TrainConfig (SimpleTrainer).

The training runs in a subprocess (tests/helpers/tensorpack_scenarios.py) because
tensorpack's launcher turns eager execution off for the whole process."""
import json
import os
import subprocess
import sys

import pytest

import tensorflow  # noqa: E402,F401  (a test requirement: requirements-dev.txt)
import tensorpack  # noqa: E402,F401

pytestmark = [pytest.mark.tf, pytest.mark.tensorpack]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = os.pathsep.join([ROOT, os.path.join(ROOT, "tests"), env.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-m", "helpers.tensorpack_scenarios",
                          str(tmp_path_factory.mktemp("tp_images"))],
                         capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    out = {}
    for line in res.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            out[r["name"]] = r
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


def test_pipeline_feeds_simple_trainer_without_copies(results):
    r = results["pipeline"]
    assert r["size"] == 4                 # steps_per_epoch taken from the pipeline: 16 images / 4
    assert r["steps"] == 8                # 2 epochs x 4 steps ran
    assert r["delivered"] == 8
    assert r["aliased"]                   # every step's input tensor was a ring slot
    assert r["n_addr"] >= 2


def test_batched_dataflow_like_tensorpack_queueinput(results):
    r = results["dataflow_batched"]
    assert r["size"] == 5 and r["steps"] == 15 and r["queue_size"] == 4
    assert r["aliased"]
    assert r["closed"]                    # the pipeline QueueInput made is closed after training


def test_unbatched_dataflow_batched_by_fastq(results):
    r = results["dataflow_unbatched"]
    assert r["size"] == 5 and r["steps"] == 10
    assert r["aliased"]


def test_misuse_is_reported(results):
    assert "size=" in results["queue_arg"]["raised"]
    assert "shape" in results["shape_mismatch"]["raised"]


def test_queueinput_is_a_tensorpack_inputsource():
    from tensorpack.input_source import FeedfreeInput, InputSource

    from fastq.tensorpack import QueueInput
    assert issubclass(QueueInput, FeedfreeInput) and issubclass(QueueInput, InputSource)
    with pytest.raises(TypeError):
        QueueInput(42)


def test_batchdata_remainder_gives_a_smaller_last_batch(results):
    r = results["remainder"]
    # 42 datapoints in batches of 8 with remainder=True: 5 full batches and one of 2, per epoch
    assert r["size"] == 6
    assert r["rows"] == [8, 8, 8, 8, 8, 2] * 2
    assert r["labels"][5] == [40, 41] and r["labels"][0] == list(range(8))
    assert r["aliased"]                   # the partial batch is a slice of its slot too


def test_int64_labels_cast_for_an_int32_model(results):
    r = results["label_cast"]
    assert r["steps"] == 4
    assert r["dtypes"] == ["int32"]       # the model saw int32 labels
    assert r["labels"] == list(range(16))
    assert r["aliased"]


def test_label_dtype_int32_needs_no_cast(results):
    r = results["label_dtype"]
    assert r["steps"] == 4 and r["dtypes"] == ["int32"]
    assert r["casts"] == [None, None]


def test_image_dtype_mismatch_is_refused_with_the_reason(results):
    msg = results["image_cast"]["raised"]
    assert "float16" in msg and "dtype='float16'" in msg and "copy every batch" in msg


def test_queue_argument_message_explains_size(results):
    msg = results["queue_arg"]["raised"]
    assert "FIFOQueue" in msg and "size=" in msg and "batch slots" in msg
