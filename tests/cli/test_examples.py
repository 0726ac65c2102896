"""The examples run, end to end, small and bounded."""
import os
import subprocess
import sys

import pytest

import tensorflow  # noqa: E402,F401  (a test requirement: requirements-dev.txt)

pytestmark = [pytest.mark.tf, pytest.mark.slow]  # each test runs an example end to end (6-9 s each, 43 s in all)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_example(*args, timeout=180):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


def test_train_keras_example():
    out = run_example("examples/train_keras.py", "--images", "48", "--epochs", "2", "--size", "48")
    assert "trained 2 epochs, 96 images" in out
    assert "slots still leased after training: 0" in out
    assert out.rstrip().endswith("OK")


@pytest.mark.tensorpack
def test_train_tensorpack_example():
    import tensorpack  # noqa: F401
    out = run_example("examples/train_tensorpack.py", "--source", "both", "--images", "32", "--batch-size", "8")
    assert "[dataflow] 2 epochs x 4 steps" in out
    assert "[native] 2 epochs x 4 steps" in out
    assert out.rstrip().endswith("OK")


def test_keras_mixup_cutmix_example():
    out = run_example("examples/keras_mixup_cutmix.py", "--images", "32", "--size", "32", "--epochs", "2",
                      "--batch-size", "8", timeout=300)
    assert "soft labels: (8, 4) float32" in out
    assert out.rstrip().endswith("OK")


def test_keras_segmentation_example():
    out = run_example("examples/keras_segmentation.py", "--images", "16", "--epochs", "2", "--size", "32",
                      "--batch-size", "4", timeout=300)
    assert "trained 2 epochs on 16 image / label-map pairs" in out
    assert out.rstrip().endswith("OK")


@pytest.mark.tensorpack
def test_tensorpack_detection_example():
    import tensorpack  # noqa: F401
    out = run_example("examples/tensorpack_detection.py", "--images", "16", "--epochs", "2", "--size", "64",
                      "--batch-size", "4", timeout=300)
    assert "gt_boxes (4, 4, 4)" in out and "gt_labels (4, 4)" in out
    assert "trained 2 epochs x 4 steps" in out
    assert out.rstrip().endswith("OK")


@pytest.mark.tensorpack
def test_tensorpack_fbresnet_example():
    import tensorpack  # noqa: F401
    out = run_example("examples/tensorpack_fbresnet.py", "--images", "16", "--size", "32", "--steps", "3",
                      timeout=240)
    assert "parity: crop box, colour draws replayed through tensorpack" in out
    assert out.rstrip().endswith("OK")
