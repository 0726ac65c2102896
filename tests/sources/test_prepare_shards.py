"""`fastq prepare --format tfrecord|tar`: shards read back with TensorFlow's reader and
parser and with tarfile (the references), images decoded with cv2 against the
originals, labels against fastq.sources.Folder; then with fastq.sources.TFRecord /
WebDataset."""
import hashlib
import json
import os
import subprocess
import sys
import tarfile

import cv2
import numpy as np
import pytest
import tensorflow as tf

import fastq
from fastq import ops
from fastq.bench import testdata
from fastq.tfrecord_codec import encode_example, tfrecord_frame

from helpers.cli_runner import ROOT, run_cli

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """3 classes (one with a nested folder), 21 JPEGs (one grayscale), one PNG, one
    file Folder ignores."""
    d = tmp_path_factory.mktemp("shards_src") / "src"
    testdata.make_jpeg_dataset(str(d / "cat"), 8, seed=21, min_side=120, max_side=300)
    testdata.make_jpeg_dataset(str(d / "dog" / "inner"), 6, seed=22, min_side=120, max_side=300)
    testdata.make_jpeg_dataset(str(d / "eel"), 6, seed=23, min_side=120, max_side=300)
    img = cv2.imread(str(d / "cat" / "000000.jpg"))
    cv2.imwrite(str(d / "dog" / "gray.jpg"), cv2.cvtColor(img, cv2.COLOR_BGR2GRAY), [cv2.IMWRITE_JPEG_QUALITY, 85])
    cv2.imwrite(str(d / "eel" / "zz.png"), img[:90, :70])
    (d / "eel" / "notes.txt").write_text("not an image")
    return str(d)


def _prepare(src, dst, *extra):
    r = run_cli("prepare", src, dst, "-q", *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _digests(folder):
    return {n: hashlib.sha256(open(os.path.join(folder, n), "rb").read()).hexdigest()
            for n in sorted(os.listdir(folder)) if n.endswith((".tfrecord", ".tar"))}


def _original(path):
    return cv2.imread(path, cv2.IMREAD_UNCHANGED)


def test_tfrecord_shards_read_back_with_tensorflow(tree, tmp_path):
    out = str(tmp_path / "tfr")
    r = _prepare(tree, out, "--format", "tfrecord", "--shard-size", "6")
    folder = fastq.sources.Folder(tree)
    n = len(folder.paths)
    assert n == 22 and f"{n} records in 4 tfrecord shard(s)" in r.stdout
    shards = sorted(os.path.join(out, s) for s in os.listdir(out) if s.endswith(".tfrecord"))
    assert [os.path.basename(s) for s in shards] == [f"data-{k:05d}-of-00004.tfrecord" for k in range(4)]
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64),
            "image/class/text": tf.io.FixedLenFeature([], tf.string),
            "image/format": tf.io.FixedLenFeature([], tf.string),
            "image/filename": tf.io.FixedLenFeature([], tf.string),
            "image/height": tf.io.FixedLenFeature([], tf.int64),
            "image/width": tf.io.FixedLenFeature([], tf.int64)}
    recs = [tf.io.parse_single_example(rec, spec) for rec in tf.data.TFRecordDataset(shards)]  # checks CRCs
    assert len(recs) == n
    per_shard = [sum(1 for _ in tf.data.TFRecordDataset(s)) for s in shards]
    assert per_shard == [6, 6, 6, 4]
    restarts = 0
    for i, ex in enumerate(recs):
        path = folder.paths[i]
        assert int(ex["image/class/label"]) == int(folder.labels[i])
        assert ex["image/class/text"].numpy().decode() == folder.class_names[int(folder.labels[i])]
        assert ex["image/filename"].numpy().decode() == os.path.relpath(path, tree)
        data = ex["image/encoded"].numpy()
        got = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
        want = _original(path)
        np.testing.assert_array_equal(got, want, err_msg=path)  # lossless: pixel-identical
        assert (int(ex["image/height"]), int(ex["image/width"])) == want.shape[:2]
        is_png = path.endswith(".png")
        assert ex["image/format"].numpy() == (b"PNG" if is_png else b"JPEG")
        if is_png:
            assert data == open(path, "rb").read()
        else:
            restarts += b"\xff\xdd" in data[:data.index(b"\xff\xda")]  # a DRI marker before SOS
    assert restarts == n - 1  # every JPEG carries restart markers now


def test_tfrecord_shards_with_fastq_sources_tfrecord(tree, tmp_path):
    out = str(tmp_path / "tfr")
    _prepare(tree, out, "--format", "tfrecord", "--shard-size", "5")
    folder = fastq.sources.Folder(tree)
    src = fastq.sources.TFRecord(os.path.join(out, "data-*.tfrecord"))
    assert len(src) == len(folder.paths)
    kw = dict(ops=[ops.RandomResizedCrop(48), ops.HorizontalFlip()], batch_size=4, drop_remainder=False, seed=3,
              workers=2, dtype="uint8")
    with fastq.Pipeline(src, **kw) as p:
        a = [tuple(np.array(x) for x in b) for b in p]
    with fastq.Pipeline(folder, **kw) as p:
        b = [tuple(np.array(x) for x in b) for b in p]
    np.testing.assert_array_equal(np.concatenate([x[1] for x in a]), folder.labels)
    # same coefficients, same crop draws: the same pixels as the original files give
    np.testing.assert_array_equal(np.concatenate([x[0] for x in a]), np.concatenate([x[0] for x in b]))


def test_tar_shards_read_back_with_tarfile_and_webdataset(tree, tmp_path):
    out = str(tmp_path / "tar")
    r = _prepare(tree, out, "--format", "tar", "--shard-size", "8", "--prefix", "train")
    folder = fastq.sources.Folder(tree)
    shards = sorted(os.path.join(out, s) for s in os.listdir(out) if s.endswith(".tar"))
    assert [os.path.basename(s) for s in shards] == [f"train-{k:05d}-of-00003.tar" for k in range(3)]
    assert "22 records in 3 tar shard(s)" in r.stdout
    members = []
    for s in shards:
        with tarfile.open(s) as t:
            members += [(m.name, t.extractfile(m).read()) for m in t.getmembers()]
    assert len(members) == 2 * len(folder.paths)
    for i, path in enumerate(folder.paths):
        (img_name, data), (cls_name, cls) = members[2 * i], members[2 * i + 1]
        ext = "png" if path.endswith(".png") else "jpg"
        assert img_name == f"{i:08d}.{ext}" and cls_name == f"{i:08d}.cls"
        assert int(cls.decode()) == int(folder.labels[i])
        got = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
        np.testing.assert_array_equal(got, _original(path), err_msg=path)
    src = fastq.sources.WebDataset(shards)
    assert len(src) == len(folder.paths)
    kw = dict(ops=[ops.Resize((40, 40))], batch_size=5, drop_remainder=False, dtype="uint8")
    with fastq.Pipeline(src, **kw) as p:
        a = [tuple(np.array(x) for x in b) for b in p]
    with fastq.Pipeline(folder, **kw) as p:
        b = [tuple(np.array(x) for x in b) for b in p]
    np.testing.assert_array_equal(np.concatenate([x[1] for x in a]), folder.labels)
    np.testing.assert_array_equal(np.concatenate([x[0] for x in a]), np.concatenate([x[0] for x in b]))


@pytest.mark.parametrize("fmt", ["tfrecord", "tar"])
def test_deterministic_and_resumable(tree, tmp_path, fmt):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    _prepare(tree, a, "--format", fmt, "--shard-size", "7", "--jobs", "1")
    _prepare(tree, b, "--format", fmt, "--shard-size", "7", "--jobs", "3")
    da = _digests(a)
    assert len(da) == 4 and da == _digests(b)  # same bytes whatever the threads
    victim = sorted(da)[2]
    os.unlink(os.path.join(a, victim))
    r = _prepare(tree, a, "--format", fmt, "--shard-size", "7")
    assert "(1 written, 3 up to date)" in r.stdout and _digests(a) == da
    r = _prepare(tree, a, "--format", fmt, "--shard-size", "7", "--force")
    assert "(4 written, 0 up to date)" in r.stdout and _digests(a) == da
    with open(os.path.join(a, "fastq-prepare.json")) as f:
        m = json.load(f)
    assert m["format"] == fmt and sorted(m["shards"]) == sorted(da) and m["samples"] == 22


def test_a_changed_source_redoes_its_shard_only(tree, tmp_path):
    import shutil
    src = str(tmp_path / "src")
    shutil.copytree(tree, src)
    out = str(tmp_path / "o")
    _prepare(src, out, "--format", "tfrecord", "--shard-size", "7")
    before = _digests(out)
    p = os.path.join(src, "eel", "000001.jpg")  # sample 16: shard 2
    img = cv2.imread(p)
    cv2.imwrite(p, 255 - img)
    r = _prepare(src, out, "--format", "tfrecord", "--shard-size", "7")
    assert "(1 written, 3 up to date)" in r.stdout
    after = _digests(out)
    changed = [k for k in before if before[k] != after[k]]
    assert changed == ["data-00002-of-00004.tfrecord"]


def test_corrupt_jpeg_is_named_or_left_out(tree, tmp_path):
    import shutil
    src = str(tmp_path / "src")
    shutil.copytree(tree, src)
    bad = os.path.join(src, "dog", "inner", "000002.jpg")
    data = open(bad, "rb").read()
    with open(bad, "wb") as f:
        f.write(data[:200])
    r = run_cli("prepare", src, str(tmp_path / "o"), "-q", "--format", "tfrecord")
    assert r.returncode == 2 and bad in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run_cli("prepare", src, str(tmp_path / "o"), "-q", "--format", "tar", "--skip-errors")
    assert r.returncode == 0, r.stderr
    assert "left out (corrupt): dog/inner/000002.jpg" in r.stderr and "21 records" in r.stdout
    with tarfile.open(os.path.join(tmp_path, "o", "data-00000-of-00001.tar")) as t:
        names = t.getnames()
    assert len(names) == 42


def test_shards_need_class_folders(tmp_path):
    testdata.make_jpeg_dataset(str(tmp_path / "flat"), 3, seed=1, min_side=64, max_side=80)
    r = run_cli("prepare", str(tmp_path / "flat"), str(tmp_path / "o"), "--format", "tar")
    assert r.returncode == 2 and "no class subfolders" in r.stderr


def test_writer_without_tensorflow_matches_tf(tree, tmp_path):
    """The command runs with TensorFlow unimportable; its records equal what
    tf.train.Example + tf.io.TFRecordWriter write for the same features."""
    out = str(tmp_path / "o")
    code = ("import sys; sys.modules['tensorflow'] = None\n"
            "from fastq.cli import main\n"
            f"rc = main(['prepare', {tree!r}, {out!r}, '-q', '--format', 'tfrecord'])\n"
            "assert 'tensorflow' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
            "sys.exit(rc)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    feats = {"image/encoded": b"\xff\xd8abc", "image/format": b"JPEG", "image/class/label": 7,
             "image/height": 300, "image/width": 2 ** 40, "image/neg": -5}
    ref = tf.train.Example(features=tf.train.Features(feature={
        k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v])) if isinstance(v, bytes)
        else tf.train.Feature(int64_list=tf.train.Int64List(value=[v])) for k, v in feats.items()}))
    assert tf.train.Example.FromString(encode_example(feats)) == ref
    ref_file = str(tmp_path / "ref.tfrecord")
    with tf.io.TFRecordWriter(ref_file) as w:
        w.write(encode_example(feats))
    assert open(ref_file, "rb").read() == tfrecord_frame(encode_example(feats))


def test_shuffled_order_keeps_folder_labels(tree, tmp_path):
    out = str(tmp_path / "o")
    _prepare(tree, out, "--format", "tfrecord", "--shard-size", "10", "--shuffle", "7")
    folder = fastq.sources.Folder(tree)
    order = np.random.default_rng(7).permutation(len(folder.paths))
    assert sorted(order.tolist()) != order.tolist()
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64),
            "image/filename": tf.io.FixedLenFeature([], tf.string)}
    shards = sorted(os.path.join(out, s) for s in os.listdir(out) if s.endswith(".tfrecord"))
    recs = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(shards)]
    assert len(recs) == len(order)
    for ex, i in zip(recs, order):
        path = folder.paths[i]
        assert ex["image/filename"].numpy().decode() == os.path.relpath(path, tree)
        assert int(ex["image/class/label"]) == int(folder.labels[i])
        got = cv2.imdecode(np.frombuffer(ex["image/encoded"].numpy(), np.uint8), cv2.IMREAD_UNCHANGED)
        np.testing.assert_array_equal(got, _original(path))
    r = _prepare(tree, out, "--format", "tfrecord", "--shard-size", "10", "--shuffle", "7")
    assert "(0 written, 3 up to date)" in r.stdout
    r = _prepare(tree, out, "--format", "tfrecord", "--shard-size", "10")  # another order: all redone
    assert "(3 written, 0 up to date)" in r.stdout
