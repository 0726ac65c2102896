"""label_dtype for the labels native readers write (TFRecord, WebDataset): the
int64 label each record holds is converted by the worker, checked against TF's
own parser (and tarfile) plus numpy's cast; a label the chosen dtype cannot hold
fails its sample with a DecodeError that names the record, or is a counted skip."""
import io
import os
import tarfile

import numpy as np
import pytest
import tensorflow as tf

import fastq
from fastq._native import _image
from fastq import errors, ops
from fastq.bench import testdata

pytestmark = pytest.mark.tf

# every boundary of every supported integer type, and values floats round
VALUES = [0, 1, -1, 127, -128, 128, 255, 256, -129, 32767, -32768, 65535, 65536, 2**31 - 1, -2**31, 2**31,
          2**32 - 1, 2**32, 2**40 + 3, 2**53 + 1, 2**63 - 1, -2**63, 16777217]
N = len(VALUES)
CHAIN = [ops.Resize((8, 8))]


def fits(v, dt):
    dt = np.dtype(dt)
    if dt.kind == "f":
        return True
    info = np.iinfo(dt)
    return info.min <= v <= info.max


def cast(v, dt):
    """numpy's cast of the int64 value (exact for integers that fit; nearest for floats)."""
    return np.array([v], np.int64).astype(dt)[0]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("labeldt")
    jpegs = testdata.make_jpeg_dataset(str(d / "jpg"), N, seed=3, min_side=20, max_side=40)
    paths = []
    for s, (lo, hi) in enumerate([(0, 9), (9, N)]):
        p = str(d / f"train-{s}.tfrecord")
        with tf.io.TFRecordWriter(p) as w:
            for i in range(lo, hi):
                with open(jpegs[i], "rb") as f:
                    feat = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f.read()])),
                            "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[VALUES[i]])),
                            "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i, -i]))}
                w.write(tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString())
        paths.append(p)
    tars = []
    for s, (lo, hi) in enumerate([(0, 12), (12, N)]):
        p = str(d / f"shard-{s}.tar")
        with tarfile.open(p, "w") as t:
            for i in range(lo, hi):
                for ext, data in (("jpg", open(jpegs[i], "rb").read()), ("cls", f"{VALUES[i]}\n".encode())):
                    ti = tarfile.TarInfo(f"s{i:04d}.{ext}")
                    ti.size = len(data)
                    t.addfile(ti, io.BytesIO(data))
        tars.append(p)
    return dict(tfrecord=paths, tar=tars)


def tf_labels(paths):
    """The labels as TF's reader and parser see them, in record order."""
    spec = {"image/class/label": tf.io.FixedLenFeature([], tf.int64)}
    return [int(tf.io.parse_single_example(r, spec)["image/class/label"]) for r in tf.data.TFRecordDataset(paths)]


def tarfile_labels(paths):
    out = []
    for p in paths:
        with tarfile.open(p) as t:
            out += [int(t.extractfile(m).read()) for m in t.getmembers() if m.name.endswith(".cls")]
    return out


def run_skip(src, dt, **kw):
    """(index -> label delivered, pipeline stats) with on_error='skip'."""
    got = {}
    # max_attempts: for int8 most labels do not fit, and each replacement must find one that does
    with fastq.Pipeline(src, batch_size=4, ops=CHAIN, label_dtype=dt, on_error="skip", return_index=True, max_attempts=500,
                        drop_remainder=False, workers=2, **kw) as p:
        assert p.output_spec[1] == ((), np.dtype(dt))
        for b in p:
            assert b[1].dtype == np.dtype(dt)
            for i, y in zip(b[-1].tolist(), b[1]):
                got.setdefault(i, []).append(y)
        return got, p.stats()


def sources(shards):
    return {
        "tfrecord": (lambda: fastq.sources.TFRecord(shards["tfrecord"]), tf_labels(shards["tfrecord"])),
        "tfrecord-stream": (lambda: fastq.sources.TFRecord(shards["tfrecord"], index=False, shuffle_buffer=5),
                            tf_labels(shards["tfrecord"])),
        "tfrecord-readahead": (lambda: fastq.sources.TFRecord(shards["tfrecord"], io_threads=2),
                               tf_labels(shards["tfrecord"])),
        "webdataset": (lambda: fastq.sources.WebDataset(shards["tar"]), tarfile_labels(shards["tar"])),
    }


@pytest.mark.parametrize("kind", ["tfrecord", "tfrecord-stream", "tfrecord-readahead", "webdataset"])
@pytest.mark.parametrize("dt", sorted(_image.NUM_TYPES))
def test_labels_match_the_reference_cast_and_misfits_are_counted_skips(shards, kind, dt):
    make, ref = sources(shards)[kind]
    assert ref == VALUES  # the independent readers see what was written
    got, st = run_skip(make(), dt)
    bad = {i for i, v in enumerate(ref) if not fits(v, dt)}
    assert st["skipped"] == len(bad)
    assert not bad & set(got), f"{dt}: samples whose label does not fit were delivered"
    for i, ys in got.items():
        for y in ys:
            want = cast(ref[i], dt)
            assert y == want and np.asarray(y).tobytes() == np.asarray(want).tobytes(), (i, ref[i], y, want)
    if bad:
        assert set(st["skipped_by_reason"]) == {"FQ_E_DECODE"}


def test_other_reader_outputs_stay_as_read(shards):
    src = fastq.sources.TFRecord(shards["tfrecord"], features={"id": ("int64", 2)})
    with fastq.Pipeline(src, batch_size=5, ops=CHAIN, label_dtype="float32", return_index=True,
                        drop_remainder=False) as p:
        assert [d for _, d in p.output_spec] == [np.float32, np.float32, np.int64, np.int64]
        for x, y, ids, idx in p:
            np.testing.assert_array_equal(y, [cast(VALUES[i], np.float32) for i in idx])
            np.testing.assert_array_equal(ids, [[i, -i] for i in idx])


@pytest.mark.parametrize("kind", ["tfrecord", "webdataset"])
def test_a_label_that_does_not_fit_is_an_error_naming_the_record(shards, kind):
    src = sources(shards)[kind][0]()
    with pytest.raises(errors.DecodeError) as ei:
        with fastq.Pipeline(src, batch_size=1, ops=CHAIN, label_dtype="int8", workers=1) as p:
            for _ in p:
                pass
    msg = str(ei.value)
    i = VALUES.index(128)  # the first value int8 cannot hold, in record order
    assert ei.value.index == i
    assert "label 128 does not fit in label_dtype int8" in msg
    if kind == "tfrecord":
        assert f"shard '{shards['tfrecord'][0]}', record {i}" in msg
    else:
        assert shards["tar"][0] in msg


def test_unsupported_label_dtypes_and_sources_without_labels(shards):
    src = fastq.sources.TFRecord(shards["tfrecord"])
    for dt in ("float16", "bool", "complex64"):
        with pytest.raises((ValueError, TypeError), match="label_dtype"):
            fastq.Pipeline(src, batch_size=2, ops=CHAIN, label_dtype=dt)
    with pytest.raises(ValueError, match="no labels"):
        fastq.Pipeline(fastq.sources.TFRecord(shards["tfrecord"], label_key=None), batch_size=2, ops=CHAIN,
                       label_dtype="int32")


def test_tf_dataset_element_spec_follows_label_dtype(shards):
    import fastq.tf as fqtf
    src = fastq.sources.TFRecord(shards["tfrecord"])
    with fastq.Pipeline(src, batch_size=4, ops=CHAIN, label_dtype=tf.int32, on_error="skip") as p:
        ds = fqtf.dataset(p)
        assert ds.element_spec[1].dtype == tf.int32
        ys = np.concatenate([y.numpy() for _, y in ds])
    # on_error="skip" replaces a sample whose label does not fit: every row is a fitting label
    fitting = {int(v) for v in VALUES if fits(v, np.int32)}
    assert ys.dtype == np.int32 and len(ys) == N // 4 * 4 and set(ys.tolist()) <= fitting
