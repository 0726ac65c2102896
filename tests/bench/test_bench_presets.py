"""The augmentation presets of ``fastq bench`` (fastq.bench.tasks: randaugment, fbresnet)
and their peers (fastq.bench.peers: torch DataLoader + torchvision v2, DALI CPU
rand_augment, tf.data + keras.layers.RandAugment, tensorpack's fbresnet augmentors on
MultiThreadMapData / MultiProcessMapDataZMQ), on tiny inputs.

References: the peers' frameworks are found with importlib here (not by fastq); the
fbresnet augmentor list is compared with tensorpack's own imgaug classes; the child
process CPU count is checked against a process that spins for a known time."""
import importlib.util
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import fastq
from fastq import bench, ops
from fastq.bench import runner, testdata
from fastq.bench.measure import cpu_delta, cpu_snapshot
from fastq.bench.tasks import TASKS, augment_chain, task_from_dict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(fastq.__file__)))


def installed(*mods):
    try:
        return all(importlib.util.find_spec(m) is not None for m in mods)
    except (ImportError, ValueError):
        return False


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    d = tmp_path_factory.mktemp("preset_jpegs")
    return testdata.make_jpeg_dataset(str(d), 64, seed=3, min_side=240, max_side=320)


def names(chain):
    return [type(o).__name__ for o in chain]


def test_preset_definitions_round_trip_and_default_peers():
    ra, fb = TASKS["randaugment"], TASKS["fbresnet"]
    assert (ra.aug, ra.dtype, ra.size, ra.batch) == ("randaugment", "float32", 224, 64)
    assert (fb.aug, fb.dtype, fb.size, fb.batch) == ("fbresnet", "uint8", 224, 64)
    assert "RandAugment(2, 9)" in ra.describe() and "RandomErasing(0.25)" in ra.describe()
    assert "fbresnet_augmentor" in fb.describe() and "uint8" in fb.describe()
    for t in (ra, fb):
        assert task_from_dict(json.loads(json.dumps(t.to_dict()))).to_dict() == t.to_dict()
    assert runner.default_peers("randaugment") == ["fastq", "dali", "torch", "tfdata"]
    assert runner.default_peers("fbresnet") == ["fastq", "tensorpack", "tensorpack_zmq"]
    assert runner.default_peers("reference") == list(runner.DEFAULT_PEERS)
    old = {k: v for k, v in TASKS["reference"].to_dict().items() if k not in ("aug", "dtype", "peers")}
    t = task_from_dict(old)  # a dict written before the preset fields existed
    assert (t.aug, t.dtype, t.peers) == (None, "float32", None)


def test_randaugment_chain_is_the_recipe():
    chain, note = augment_chain(TASKS["randaugment"])
    assert names(chain) == ["RandomResizedCrop", "HorizontalFlip", "RandAugment", "Normalize", "RandomErasing"]
    assert note is None
    ra, er = chain[2], chain[4]
    assert (ra.num_ops, ra.magnitude, ra.num_magnitude_bins) == (2, 9, 31)
    assert er.p == 0.25 and er.scale == (0.02, 0.33) and er.ratio == (0.3, 3.3)
    ops.compile_ops(chain)  # a valid chain


def test_fbresnet_chain_is_the_tensorpack_parity_chain_in_bgr():
    from fastq.tensorpack import fbresnet_augmentor
    chain, note = augment_chain(TASKS["fbresnet"])
    assert note is None
    assert names(chain) == names(fbresnet_augmentor(224)) == ["TensorpackCrop", "TensorpackColor", "HorizontalFlip"]
    assert TASKS["fbresnet"].channels == "BGR" and TASKS["fbresnet"].dtype == "uint8"
    ops.compile_ops(chain, dtype="uint8", channels="BGR")


def test_run_reports_peers_not_installed_and_not_for_the_task(jpegs, monkeypatch):
    real = runner.available
    monkeypatch.setattr(runner, "available", lambda p: False if p == "dali" else real(p))
    lines = []
    res = bench.run(jpegs, task="randaugment", peers=["fastq", "dali", "pyloop"], rounds=1, retry_busy=0,
                    progress=False, out=lines.append)
    assert list(res["peers"]) == ["fastq"] and not res["failed"]
    assert res["peers"]["fastq"]["images_per_epoch"] == 64
    assert "dali" in res["not_installed"] and "does not import" in res["not_installed"]["dali"]
    assert "not available for task randaugment" in res["not_available"]["pyloop"]
    assert res["notes"] == {}  # the preset is exact: no note
    assert res["task"]["aug"] == "randaugment"
    out = []
    bench.print_report(res, out=out.append)
    text = "\n".join(out)
    assert "n/a for task" in text and "not installed" in text


@pytest.mark.slow
def test_randaugment_peers_that_are_installed_run_and_the_others_say_why(jpegs):
    peers = ["fastq", "dali", "torch", "tfdata"]
    res = bench.run(jpegs, task="randaugment", peers=peers, rounds=1, retry_busy=0, progress=False,
                    out=lambda m: None)
    present = {"fastq": True, "dali": installed("nvidia") and installed("nvidia.dali"),
               "torch": installed("torch", "torchvision"), "tfdata": installed("tensorflow")}
    assert not res["failed"], res["failed"]
    for p, here in present.items():
        if here:
            s = res["peers"][p]
            assert s["images_per_epoch"] == 64 and s["images_per_s"] > 0
        else:
            assert p in res["not_installed"] and "does not import" in res["not_installed"][p]
    if present["tfdata"]:
        assert "keras" in res["peers"]["tfdata"]["info"]
        assert res["peers"]["tfdata"]["label"].startswith("tf.data + keras RandAugment")


@pytest.mark.tensorpack
def test_fbresnet_augmentors_are_tensorpack_examples_list():
    import cv2
    from tensorpack.dataflow import imgaug
    from fastq.bench.peers import fbresnet_augmentors
    augs = fbresnet_augmentors(224)
    assert [type(a) for a in augs] == [imgaug.GoogleNetRandomCropAndResize, imgaug.RandomOrderAug, imgaug.Flip]
    assert augs[0].target_shape == 224 and augs[0].interp == cv2.INTER_CUBIC
    inner = augs[1].aug_lists
    assert [type(a) for a in inner] == [imgaug.BrightnessScale, imgaug.Contrast, imgaug.Saturation,
                                        imgaug.Lighting]
    # BGR order: the eigen values reversed, as in tensorpack's example
    np.testing.assert_allclose(inner[3].eigval, np.array([0.0045, 0.0188, 0.2175]) * 255)
    img = (np.random.RandomState(0).rand(300, 400, 3) * 255).astype(np.uint8)
    out = imgaug.AugmentorList(augs).augment(img)
    assert out.shape == (224, 224, 3)


@pytest.mark.slow
@pytest.mark.tensorpack
def test_fbresnet_runs_on_both_tensorpack_parallel_mappers(jpegs):
    res = bench.run(jpegs, task="fbresnet", rounds=1, retry_busy=0, progress=False, out=lambda m: None)
    assert res["order"] == ["fastq", "tensorpack", "tensorpack_zmq"]
    ran = set(res["peers"])
    assert "fastq" in ran and "tensorpack" in ran
    # the ZMQ mapper needs pyzmq and working IPC sockets: it runs, or says why it did not
    if "tensorpack_zmq" not in ran:
        assert "tensorpack_zmq" in res["failed"] or "tensorpack_zmq" in res["not_installed"]
    for p in ran:
        assert res["peers"][p]["images_per_epoch"] == 64


def _spin(seconds):
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        pass


def test_cpu_snapshot_counts_live_child_processes():
    a = cpu_snapshot()
    p = mp.get_context("fork").Process(target=_spin, args=(0.6,))
    p.start()
    time.sleep(0.3)
    b = cpu_snapshot()  # the child is alive here: counted from /proc
    p.join()
    c = cpu_snapshot()  # reaped: counted by os.times
    own_live = cpu_delta(a, b)["own_cpu_s"]
    own_done = cpu_delta(a, c)["own_cpu_s"]
    assert own_live > 0.05, own_live  # this process itself only sleeps
    assert own_done >= own_live and own_done > 0.1


def test_cli_fbresnet_names_the_peers_it_cannot_run(jpegs, tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out_json = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "fastq", "bench", os.path.dirname(jpegs[0]), "--task", "fbresnet",
                        "--quick", "--peers", "fastq,pyloop", "--no-progress", "--json", str(out_json)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out_json.read_text())
    assert list(res["peers"]) == ["fastq"] and res["task"]["dtype"] == "uint8"
    assert "not available for task fbresnet" in res["not_available"]["pyloop"]
    assert "n/a for task" in r.stdout


# -- detection / segmentation (fastq.bench.dense, issue 19) ----------------------------

@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    d = tmp_path_factory.mktemp("dense")
    return testdata.make_dense_dataset(str(d), 16, seed=2, min_side=96, max_side=200)


def test_dense_presets_definitions_and_annotations(dense):
    from fastq.bench.dense import MAX_BOXES, load_annotations
    det, seg = TASKS["detection"], TASKS["segmentation"]
    assert (det.batch, det.dtype, det.data, seg.batch, seg.size) == (8, "uint8", "dense", 8, 512)
    assert runner.default_peers("detection") == ["fastq", "torch", "dali", "pyloop"]
    assert runner.default_peers("segmentation") == ["fastq", "torch", "pyloop"]
    assert "pad='batch'" in det.describe() and "multiple of 32" in det.describe()
    assert names(det.fastq_ops()) == ["ResizeShortestEdge", "HorizontalFlip"]
    rse = det.fastq_ops()[0]
    assert rse.short == (800,) and rse.max_size == 1333
    assert names(seg.fastq_ops()) == ["RandomResizedCrop", "HorizontalFlip"]
    assert task_from_dict(json.loads(json.dumps(det.to_dict()))).to_dict() == det.to_dict()
    import cv2
    ann = load_annotations(dense)
    for p, b, c, m in zip(dense, ann["boxes"], ann["classes"], ann["mask_paths"]):
        h, w = cv2.imread(p).shape[:2]
        assert 1 <= len(b) <= MAX_BOXES and len(c) == len(b) and c.min() >= 1
        assert (b[:, 0] < b[:, 2]).all() and (b[:, 2] <= w).all() and (b[:, 3] <= h).all() and b.min() >= 0
        assert cv2.imread(m, cv2.IMREAD_UNCHANGED).shape == (h, w)
    with pytest.raises(ValueError, match="dense_annotations.json is missing"):
        load_annotations(["/nonexistent/x.jpg"])


def test_detection_preset_batches_are_padded_to_the_batch_maximum(dense):
    """The fastq side of the preset: variable batches, H and W multiples of 32, boxes."""
    from fastq.bench.dense import load_annotations
    from fastq.targets import Targets
    ann = load_annotations(dense)
    p = fastq.Pipeline(fastq.sources.Files(dense, targets=Targets(ann["boxes"], ann["classes"], max_boxes=8)),
                       batch_size=8, ops=TASKS["detection"].fastq_ops(), dtype="uint8", pad="batch",
                       pad_multiple=32, workers=2)
    for images, boxes, classes, num, info, sizes in p:
        assert images.shape[1] % 32 == 0 and images.shape[2] % 32 == 0 and images.shape[1] <= 1344
        assert images.shape[1:3] == tuple(-(-int(v) // 32) * 32 for v in sizes.max(axis=0))
        assert max(sizes.max(axis=0)) == 1333 or min(sizes.max(axis=0)) >= 800
        assert (num >= 1).all()
    p.close()


@pytest.mark.parametrize("task", ["detection", "segmentation"])
def test_dense_presets_run_fastq_and_the_cv2_loop(dense, task):
    res = bench.run(dense, task=task, peers=["fastq", "pyloop"], rounds=1, retry_busy=0, progress=False,
                    out=lambda m: None)
    assert not res["failed"], res["failed"]
    for p in ("fastq", "pyloop"):
        assert res["peers"][p]["images_per_epoch"] == 16 and res["peers"][p]["images_per_s"] > 0
    if task == "detection":
        assert res["peers"]["fastq"]["info"]["options"] == {"pad": "batch", "pad_multiple": 32}


@pytest.mark.slow
@pytest.mark.parametrize("task", ["detection", "segmentation"])
def test_dense_presets_installed_peers_run(dense, task):
    res = bench.run(dense, task=task, rounds=1, retry_busy=0, progress=False, out=lambda m: None)
    assert not res["failed"], res["failed"]
    present = {"torch": installed("torch", "torchvision"), "dali": installed("nvidia") and installed("nvidia.dali")}
    for p in runner.default_peers(task):
        if p in present and not present[p]:
            assert p in res["not_installed"]
        else:
            assert res["peers"][p]["images_per_epoch"] == 16


def test_cli_dense_tasks_refuse_data(jpegs):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    r = subprocess.run([sys.executable, "-m", "fastq", "bench", os.path.dirname(jpegs[0]), "--task", "detection",
                        "--quick", "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode != 0 and "omit DATA" in r.stderr
