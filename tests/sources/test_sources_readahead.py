"""io_threads / read-ahead on the file-based native sources: the batches, labels,
errors and skips are the same as without read-ahead, for any thread counts, over
several epochs and a resume; and the I/O threads really serve samples."""
import os
import shutil
import tarfile

import numpy as np
import pytest

import fastq
from fastq import errors, ops
from fastq.bench import testdata
from fastq.sources import read_ahead_stats

N = 24
CHAIN = [ops.RandomResizedCrop(32), ops.HorizontalFlip(), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    d = tmp_path_factory.mktemp("ra")
    jpegs = testdata.make_jpeg_dataset(str(d / "src"), N, seed=2, min_side=60, max_side=120)
    root = d / "tree"
    for i, p in enumerate(jpegs):
        os.makedirs(root / f"c{i % 3}", exist_ok=True)
        shutil.copy(p, root / f"c{i % 3}" / os.path.basename(p))
    (root / "c1" / "zz_bad.jpg").write_bytes(b"\xff\xd8\xff\xe0 broken")
    tars = []
    for s in range(2):
        t = str(d / f"s{s}.tar")
        with tarfile.open(t, "w") as tf:
            for i in range(s * 12, s * 12 + 12):
                tf.add(jpegs[i], arcname=f"k{i:04d}.jpg")
                info = tarfile.TarInfo(f"k{i:04d}.cls")
                data = str(i).encode()
                info.size = len(data)
                import io
                tf.addfile(info, io.BytesIO(data))
        tars.append(t)
    return str(root), tars


LAST_STATS = {}


def epochs(src, n=3, **kw):
    kw.setdefault("ops", CHAIN)
    with fastq.Pipeline(src, batch_size=4, seed=7, shuffle=True, drop_remainder=False, **kw) as p:
        try:
            return [[tuple(np.array(a) for a in b) for b in p] for _ in range(n)]
        finally:
            LAST_STATS.clear()
            LAST_STATS.update(read_ahead_stats(src))  # while the pipeline (and its read-ahead) exists


def same(a, b):
    assert len(a) == len(b)
    for ea, eb in zip(a, b):
        assert len(ea) == len(eb)
        for x, y in zip(ea, eb):
            for u, v in zip(x, y):
                assert u.tobytes() == v.tobytes()


def test_folder_read_ahead_same_batches_and_skips(tree):
    root, _ = tree
    ref = epochs(fastq.sources.Folder(root), on_error="skip", workers=2)
    for io, depth, w in ((1, 1, 1), (3, 8, 2), (8, 64, 4)):
        src = fastq.sources.Folder(root, io_threads=io, read_ahead=depth)
        same(epochs(src, on_error="skip", workers=w), ref)
        st = LAST_STATS
        assert st["read_ahead"] + st["read_direct"] >= 3 * len(src)
        assert st["read_ahead"] > 0
    files = fastq.sources.Folder(root)
    src = fastq.sources.Files(files.paths, files.labels, io_threads=3, read_ahead=5)
    same(epochs(src, on_error="skip", workers=2), ref)
    assert LAST_STATS["read_ahead"] > 0
    src = fastq.sources.Folder(root, io_threads=2)
    with pytest.raises(errors.DecodeError) as ei:
        epochs(src, workers=2)
    assert ei.value.path.endswith("zz_bad.jpg") and "zz_bad.jpg" in str(ei.value)


@pytest.mark.tf
def test_tfrecord_and_webdataset_read_ahead(tree, tmp_path, no_leaked_threads):
    import tensorflow as tf
    root, tars = tree
    folder = fastq.sources.Folder(root)
    paths = [p for p in folder.paths if not p.endswith("zz_bad.jpg")]
    shard = str(tmp_path / "t.tfrecord")
    with tf.io.TFRecordWriter(shard) as w:
        for i, p in enumerate(paths):
            with open(p, "rb") as f:
                w.write(tf.train.Example(features=tf.train.Features(feature={
                    "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f.read()])),
                    "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))})
                ).SerializeToString())
    for make in (lambda **k: fastq.sources.TFRecord([shard], **k), lambda **k: fastq.sources.WebDataset(tars, **k)):
        ref = epochs(make(), workers=2)
        src = make(io_threads=4, read_ahead=6)
        same(epochs(src, workers=3), ref)
        assert LAST_STATS["read_ahead"] > 0
        # resume mid-epoch with read-ahead
        kw = dict(ops=CHAIN, batch_size=4, seed=7, shuffle=True, workers=2)
        with fastq.Pipeline(src, **kw) as p:
            it = iter(p)
            next(it)
            state = p.state_dict()
            rest = [np.array(b[0]) for b in it]
        with fastq.Pipeline(make(io_threads=2, read_ahead=3), **kw) as q:
            q.load_state_dict(state)
            got = [np.array(b[0]) for b in q]
        assert len(got) == len(rest) and all(a.tobytes() == b.tobytes() for a, b in zip(got, rest))


def test_bad_io_options(tree):
    root, tars = tree
    with pytest.raises(ValueError, match="io_threads"):
        fastq.sources.Folder(root, io_threads=-1)
    with pytest.raises(ValueError, match="io_threads"):
        fastq.sources.Files([os.path.join(root, "c0", os.listdir(os.path.join(root, "c0"))[0])], io_threads=1.5)
    with pytest.raises(ValueError, match="read_ahead"):
        fastq.sources.WebDataset(tars, io_threads=2, read_ahead=0)
