"""The ``hires`` bench task and its generator (fastq.bench.testdata.make_hires_dataset,
fastq.bench.data.generated_dataset(kind="hires")): deterministic, sized as stated,
dense entropy data; the task runs the reference chain."""
import os

import pytest

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)
from fastq.bench import data as D
from fastq.bench import testdata
from fastq.bench.tasks import REFERENCE, TASKS, task_from_dict

import cv2  # noqa: E402


def test_generator_is_deterministic_and_sized(tmp_path):
    a = testdata.make_hires_dataset(str(tmp_path / "a"), 3, seed=5, min_width=300, max_width=420)
    b = testdata.make_hires_dataset(str(tmp_path / "b"), 3, seed=5, min_width=300, max_width=420)
    c = testdata.make_hires_dataset(str(tmp_path / "c"), 3, seed=6, min_width=300, max_width=420)
    ra = [open(p, "rb").read() for p in a]
    assert ra == [open(p, "rb").read() for p in b]
    assert ra != [open(p, "rb").read() for p in c]
    for p in a:
        img = cv2.imread(p)
        assert img is not None and 300 <= max(img.shape[:2]) <= 420
        assert 1.3 <= max(img.shape[:2]) / min(img.shape[:2]) <= 1.8
    with pytest.raises(ValueError):
        testdata.make_hires_dataset(str(tmp_path / "d"), 1, min_width=500, max_width=400)


def test_full_size_image_is_camera_like(tmp_path):
    (p,) = testdata.make_hires_dataset(str(tmp_path), 1, seed=0)
    img = cv2.imread(p)
    assert 1800 <= max(img.shape[:2]) <= 3200
    # sensor-like noise keeps the entropy data dense: > 1.2 bits per pixel at quality 92
    assert os.path.getsize(p) * 8 / (img.shape[0] * img.shape[1]) > 1.2


def test_hires_task_and_generated_set(tmp_path, monkeypatch):
    t = TASKS["hires"]
    assert t.data == "hires" and REFERENCE.data == "jpeg"
    assert t.describe() == REFERENCE.describe()
    assert [type(o).__name__ for o in t.fastq_ops()] == [type(o).__name__ for o in REFERENCE.fastq_ops()]
    assert task_from_dict(t.to_dict()).data == "hires"
    old = {k: v for k, v in REFERENCE.to_dict().items() if k != "data"}
    assert task_from_dict(old).data == "jpeg"  # a dict written before the field existed
    with pytest.raises(D.BenchInputError, match="unknown generated set"):
        D.generated_dataset(2, str(tmp_path), kind="nope")
    calls = []
    real = testdata.make_hires_dataset

    def small(out_dir, n, **kw):
        calls.append(n)
        return real(out_dir, n, min_width=200, max_width=260, **kw)

    monkeypatch.setattr(testdata, "make_hires_dataset", small)
    paths = D.generated_dataset(2, str(tmp_path), progress=False, out=lambda m: None, kind="hires")
    assert [os.path.basename(os.path.dirname(p)) for p in paths] == ["hires_2_seed0"] * 2
    assert D.generated_dataset(2, str(tmp_path), progress=False, out=lambda m: None, kind="hires") == paths
    assert calls == [2]  # the second call reused the cached set
