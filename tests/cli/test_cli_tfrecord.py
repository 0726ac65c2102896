"""`fastq bench` on TFRecord shards (written here with tf.io.TFRecordWriter), run as a
subprocess; the pure-Python Example reader of the cv2 peers is checked against
TensorFlow's own parser."""
import importlib.util
import json
import os

import numpy as np
import pytest

from fastq import bench
from fastq.bench import testdata
from fastq.bench.data import PyRecords, TFRecordData
from fastq.tfrecord_codec import parse_example

from helpers.cli_runner import installed, run_cli

import tensorflow as tf  # noqa: E402  (the shards are written and parsed with TF, the reference)

pytestmark = pytest.mark.tf


def _example(image, label, extra=None):
    feat = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
            "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}
    feat.update(extra or {})
    return tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString()


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """3 shards named like TF's ImageNet scripts (train-0000k-of-00003), 150 JPEGs, labels
    -3..6 (negative ones included: int64 varints of 10 bytes)."""
    d = tmp_path_factory.mktemp("tfr")
    paths = testdata.make_jpeg_dataset(str(d / "src"), 150, seed=11, min_side=200, max_side=400)
    out = d / "shards"
    out.mkdir()
    labels = {}
    for s in range(3):
        with tf.io.TFRecordWriter(str(out / f"train-{s:05d}-of-00003")) as w:
            for i, p in enumerate(paths[s::3]):
                with open(p, "rb") as f:
                    data = f.read()
                lab = (i * 7 + s) % 10 - 3
                w.write(_example(data, lab, {"image/height": tf.train.Feature(
                    float_list=tf.train.FloatList(value=[1.5, -2.25]))}))
                labels[(s, i)] = (data, lab)
    return str(out), labels


def test_find_tfrecords_recognises_shards_and_not_images(shards, tmp_path):
    folder, _ = shards
    found = bench.find_tfrecords(folder)
    assert [os.path.basename(p) for p in found] == [f"train-{s:05d}-of-00003" for s in range(3)]
    assert bench.find_tfrecords(os.path.join(folder, "train-*")) == found
    assert bench.find_tfrecords(os.path.join(os.path.dirname(folder), "src")) is None  # image folder
    (tmp_path / "x.tfrecord").write_bytes(b"")
    assert bench.find_tfrecords(str(tmp_path / "x.tfrecord")) == [str(tmp_path / "x.tfrecord")]


def test_python_record_reader_matches_tensorflow(shards, tmp_path):
    """PyRecords (os.pread + pure-Python Example parser) against TFRecordDataset +
    parse_single_example, record by record, over the first 100 records."""
    folder, _ = shards
    inp = bench.TFRecordInput(bench.find_tfrecords(folder), 100)
    assert len(inp) == 100 and inp.total == 150 and inp.all_jpeg
    data = TFRecordData(inp.shards, inp.write_index(str(tmp_path)), len(inp), inp.all_jpeg,
                        "image/encoded", "image/class/label")
    recs = PyRecords(data)
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64),
            "image/height": tf.io.FixedLenFeature([2], tf.float32)}
    ref = list(tf.data.TFRecordDataset(inp.shards).take(100))
    assert len(recs) == len(ref) == 100
    for i, rec in enumerate(ref):
        ex = tf.io.parse_single_example(rec, spec)
        img, lab = recs.read(i)
        assert img == ex["image/encoded"].numpy() and lab == int(ex["image/class/label"].numpy())
        got = parse_example(rec.numpy(), {"image/height"})
        np.testing.assert_array_equal(np.float32(got["image/height"]), ex["image/height"].numpy())
    recs.close()


@pytest.mark.slow
def test_bench_quick_on_tfrecord_shards(shards, tmp_path):
    folder, _ = shards
    out_json = tmp_path / "b.json"
    r = run_cli("bench", os.path.join(folder, "train-*-of-*"), "--quick", "--no-progress",
                "--peers", "fastq,tfdata,tensorpack,pyloop,dali", "--json", str(out_json),
                "--plot", str(tmp_path / "b.png"))
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out_json.read_text())
    assert res["input"]["kind"] == "tfrecord" and res["input"]["records"] == 128
    assert res["input"]["records_in_shards"] == 150 and len(res["input"]["shards"]) == 3
    assert not res["failed"], res["failed"]
    assert res["order"] == ["fastq", "tfdata", "tensorpack", "pyloop", "dali"]
    for peer in ("fastq", "tfdata"):
        assert res["peers"][peer]["images_per_epoch"] == 128 and res["peers"][peer]["images_per_s"] > 0
    assert res["peers"]["fastq"]["images_per_epoch"] == res["peers"]["tfdata"]["images_per_epoch"]
    for peer, mods in (("tensorpack", ("tensorpack", "cv2")), ("pyloop", ("cv2",))):
        if installed(*mods):
            assert res["peers"][peer]["images_per_epoch"] == 128
            assert "Python reader" in res["input"]["readers"][peer]
        else:
            assert peer in res["not_installed"]
    # DALI has no TFRecord path in fastq bench: listed, never measured
    assert "dali" not in res["peers"]
    if importlib.util.find_spec("nvidia") is not None and installed("nvidia.dali"):
        assert "not available for TFRecord input" in res["not_available"]["dali"]
    else:
        assert "dali" in res["not_installed"]
    assert "first 128 of 150 records" in r.stdout
    from PIL import Image
    with Image.open(tmp_path / "b.png") as im:  # the chart of the measured peers
        assert im.format == "PNG" and im.width > 300 and im.height > 200


def test_bench_bad_tfrecord_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(b"\x05" * 40)
    r = run_cli("bench", str(bad), "--quick", "--no-progress", "--peers", "fastq")
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fastq bench: error: ") and str(bad) in err[0], r.stderr


def test_bench_tfrecord_without_the_keys_names_the_record(tmp_path):
    p = tmp_path / "x-00000-of-00001"
    with tf.io.TFRecordWriter(str(p)) as w:
        for _ in range(70):
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "jpeg": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x"]))})).SerializeToString())
    r = run_cli("bench", str(p), "--quick", "--no-progress", "--peers", "fastq")
    assert r.returncode == 2
    assert "record 0" in r.stderr and "image/encoded" in r.stderr, r.stderr
