"""fastq.sources.TFRecord against TensorFlow's own writer and parser: shards
written by tf.io.TFRecordWriter from tf.train.Example, labels/features compared
with tf.io.parse_single_example, images compared with the Files source on the
same JPEGs and seed; the promises of native sources (worker-count determinism,
shards, resume, explain, stats); and bad input (CRC, truncation, huge length,
missing key / wrong type, fuzzed protobuf)."""
import os
import shutil
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import fastq
from fastq._native import _image
from fastq import errors, ops
from fastq.bench import testdata

import tensorflow as tf

pytestmark = pytest.mark.tf

N = 24
SHARDS = 3
PER = N // SHARDS
CHAIN = [ops.RandomResizedCrop(40), ops.HorizontalFlip(), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]
FEATS = {"image/object/bbox/xmin": ("float32", 2), "image/extra/id": ("int64", 3)}


def _example(data, label, i):
    f = tf.train.Feature
    return tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": f(bytes_list=tf.train.BytesList(value=[data])),
        "image/format": f(bytes_list=tf.train.BytesList(value=[b"jpeg"])),
        "image/class/label": f(int64_list=tf.train.Int64List(value=[label])),
        "image/object/bbox/xmin": f(float_list=tf.train.FloatList(value=[i / 7.0, -1.5e-3 * i])),
        "image/extra/id": f(int64_list=tf.train.Int64List(value=[i, -i, 2 ** 40 + i])),
    })).SerializeToString()


def write_shards(d, jpegs, labels, compression=None, name="train"):
    opts = tf.io.TFRecordOptions(compression_type=compression) if compression else None
    paths = []
    for s in range(SHARDS):
        p = os.path.join(d, f"{name}-{s:05d}-of-{SHARDS:05d}")
        with tf.io.TFRecordWriter(p, opts) as w:
            for i in range(s * PER, (s + 1) * PER):
                with open(jpegs[i], "rb") as f:
                    w.write(_example(f.read(), int(labels[i]), i))
        paths.append(p)
    return paths


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("tfr")
    jpegs = testdata.make_jpeg_dataset(str(d / "jpg"), N, seed=8, min_side=60, max_side=140)
    labels = (np.arange(N) * 37) % 1000
    os.makedirs(d / "plain")
    os.makedirs(d / "gz")
    return dict(jpegs=jpegs, labels=labels, dir=str(d), paths=write_shards(str(d / "plain"), jpegs, labels),
                gz=write_shards(str(d / "gz"), jpegs, labels, "GZIP"))


def tf_reference(paths, compression=None):
    """Records of the shards as TF's reader + parser see them."""
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64),
            "image/object/bbox/xmin": tf.io.FixedLenFeature([2], tf.float32),
            "image/extra/id": tf.io.FixedLenFeature([3], tf.int64)}
    out = []
    for rec in tf.data.TFRecordDataset(paths, compression_type=compression or ""):
        ex = tf.io.parse_single_example(rec, spec)
        out.append({k: v.numpy() for k, v in ex.items()})
    return out


def run(src, **kw):
    kw.setdefault("ops", CHAIN)
    kw.setdefault("batch_size", 4)
    with fastq.Pipeline(src, **kw) as p:
        return [tuple(np.array(a) for a in b) for b in p]


def cat(batches, k):
    return np.concatenate([b[k] for b in batches])


@pytest.mark.parametrize("comp", [None, "GZIP"])
def test_outputs_match_tf_parser(data, comp):
    paths = data["gz"] if comp else data["paths"]
    ref = tf_reference(paths, comp)
    src = fastq.sources.TFRecord(paths, compression=comp, features=FEATS)
    assert len(src) == len(ref) == N
    out = run(src, ops=[ops.Resize((16, 16))], return_index=True, drop_remainder=False, workers=3)
    idx = cat(out, 4)
    assert idx.tolist() == list(range(N))
    np.testing.assert_array_equal(cat(out, 1), [r["image/class/label"] for r in ref])
    np.testing.assert_array_equal(cat(out, 2), np.stack([r["image/object/bbox/xmin"] for r in ref]))
    np.testing.assert_array_equal(cat(out, 3), np.stack([r["image/extra/id"] for r in ref]))
    assert cat(out, 2).dtype == np.float32 and cat(out, 3).dtype == np.int64
    assert [src.location(i) for i in (0, PER, N - 1)] == [(paths[0], 0), (paths[1], 0), (paths[2], PER - 1)]


def test_native_parser_matches_tf_on_every_record(data):
    feats = [("image/encoded", "bytes", 1), ("image/class/label", "int64", 1),
             ("image/object/bbox/xmin", "float32", 2), ("image/extra/id", "int64", 3)]
    ref = tf_reference(data["paths"])
    recs = [r.numpy() for r in tf.data.TFRecordDataset(data["paths"])]
    for rec, r in zip(recs, ref):
        img, lab, box, ids = _image.parse_example(rec, feats)
        assert img == r["image/encoded"]
        assert lab.tolist() == [r["image/class/label"]]
        np.testing.assert_array_equal(box, r["image/object/bbox/xmin"])
        np.testing.assert_array_equal(ids, r["image/extra/id"])


def test_masked_crc_matches_tf_framing(data):
    with open(data["paths"][0], "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert _image.masked_crc32c(raw[:8]) == struct.unpack("<I", raw[8:12])[0]
    assert _image.masked_crc32c(raw[12:12 + n]) == struct.unpack("<I", raw[12 + n:16 + n])[0]
    # standard CRC-32C check value of "123456789" (RFC 3720), unmasked
    c = _image.masked_crc32c(b"123456789") - 0xa282ead8 & 0xffffffff
    assert ((c << 15) | (c >> 17)) & 0xffffffff == 0xe3069283


def test_same_images_as_files_source_for_any_worker_count(data):
    files = fastq.sources.Files(data["jpegs"], labels=data["labels"])
    ref = run(files, seed=3, shuffle=True, workers=2)
    for comp, paths, w in ((None, data["paths"], 1), (None, data["paths"], 4), ("GZIP", data["gz"], 3)):
        got = run(fastq.sources.TFRecord(paths, compression=comp), seed=3, shuffle=True, workers=w)
        assert len(got) == len(ref) == N // 4
        for a, b in zip(got, ref):
            assert a[0].tobytes() == b[0].tobytes()
            np.testing.assert_array_equal(a[1], b[1])


def test_shards_disjoint_covering_and_resume(data):
    src = fastq.sources.TFRecord(data["paths"])
    seen = []
    for i in range(5):
        out = run(src.shard(5, i), return_index=True, batch_size=2, drop_remainder=False)
        idx = cat(out, 2)
        np.testing.assert_array_equal(cat(out, 1), data["labels"][idx])
        seen += idx.tolist()
    assert sorted(seen) == list(range(N))
    kw = dict(ops=CHAIN, batch_size=4, seed=5, shuffle=True, workers=2)
    with fastq.Pipeline(src, **kw) as p:
        it = iter(p)
        [next(it) for _ in range(2)]
        state = p.state_dict()
        rest = [tuple(np.array(a) for a in b) for b in it]
        ex = p.explain(0, 5)
    with fastq.Pipeline(src, **kw) as q:
        q.load_state_dict(state)
        got = [tuple(np.array(a) for a in b) for b in q]
    assert len(got) == len(rest) == N // 4 - 2
    for a, b in zip(got, rest):
        assert a[0].tobytes() == b[0].tobytes() and a[1].tolist() == b[1].tolist()
    with fastq.Pipeline(fastq.sources.Files(data["jpegs"], labels=data["labels"]), **kw) as f:
        assert f.explain(0, 5) == ex  # same image, seed and index: same decode and augmentation
    assert ex["sample_index"] == 5


def test_index_cache_given_index_and_stale_cache(data, tmp_path):
    paths = []
    for p in data["paths"]:
        q = tmp_path / os.path.basename(p)
        shutil.copy(p, q)
        paths.append(str(q))
    ref = run(fastq.sources.TFRecord(data["paths"], index_dir=str(tmp_path / "cache")), seed=1, shuffle=True)
    a = fastq.sources.TFRecord(paths)
    assert all(os.path.exists(p + ".fqidx") for p in paths)
    b = fastq.sources.TFRecord(paths)  # from the cache
    # given indexes: offsets (from tf's own record sizes) and a DALI-style text file
    offs, dali = [], []
    for k, p in enumerate(paths):
        sizes = [len(r.numpy()) + 16 for r in tf.data.TFRecordDataset([p])]
        o = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
        offs.append(o.tolist())
        t = tmp_path / f"idx{k}.txt"
        t.write_text("".join(f"{x} {s}\n" for x, s in zip(o, sizes)))
        dali.append(str(t))
    c = fastq.sources.TFRecord(paths, index=offs)
    d = fastq.sources.TFRecord(paths, index=dali)
    for src in (a, b, c, d):
        got = run(src, seed=1, shuffle=True)
        for x, y in zip(got, ref):
            assert x[0].tobytes() == y[0].tobytes() and x[1].tolist() == y[1].tolist()
    # a shard rewritten with fewer records invalidates its cached index
    with tf.io.TFRecordWriter(paths[0]) as w:
        with open(data["jpegs"][0], "rb") as f:
            w.write(_example(f.read(), 1, 0))
    os.utime(paths[0], ns=(1, 1))
    assert len(fastq.sources.TFRecord(paths)) == 1 + 2 * PER
    with pytest.raises(ValueError, match="does not fit"):
        fastq.sources.TFRecord(paths, index=[[0, 10 ** 9]] + offs[1:])


# ------------------------------------------------------------------ bad input

def _copy(data, tmp_path):
    out = []
    for p in data["paths"]:
        q = str(tmp_path / os.path.basename(p))
        shutil.copy(p, q)
        out.append(q)
    return out


def _record_offsets(path):
    o, ln, t = _image.tfrecord_scan(path)
    assert t is None
    return o, ln


def _first_error(src, **kw):
    with pytest.raises(errors.FastqError) as ei:
        run(src, drop_remainder=False, workers=2, **kw)
    return ei.value


def _skip_stats(src):
    with fastq.Pipeline(src, ops=CHAIN, batch_size=4, drop_remainder=False, on_error="skip", return_index=True) as p:
        n = sum(len(b[0]) for b in p)
        return n, p.stats()


def test_flipped_data_byte_is_a_crc_error_naming_shard_and_record(data, tmp_path):
    paths = _copy(data, tmp_path)
    o, ln = _record_offsets(paths[1])
    with open(paths[1], "r+b") as f:  # flip a byte in the middle of record 3's data
        pos = int(o[3]) + 12 + int(ln[3]) // 2
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0x20]))
    with pytest.raises(tf.errors.DataLossError):  # TF agrees the shard is corrupt
        list(tf.data.TFRecordDataset([paths[1]]))
    src = fastq.sources.TFRecord(paths)
    e = _first_error(src)
    assert isinstance(e, errors.ReadError)
    assert f"shard '{paths[1]}', record 3" in str(e) and "data CRC mismatch" in str(e)
    assert e.index == PER + 3 and e.path == paths[1]
    n, st = _skip_stats(src)
    assert n == N and st["skipped"] == 1 and st["skipped_by_reason"] == {"FQ_E_IO": 1}
    assert "record 3" in st["last_skip_message"]["FQ_E_IO"]


def test_flipped_length_byte_truncation_and_huge_length(data, tmp_path):
    paths = _copy(data, tmp_path)
    o, ln = _record_offsets(paths[0])
    with open(paths[0], "r+b") as f:  # corrupt the length field of record 5
        f.seek(int(o[5]) + 1)
        f.write(b"\x7f")
    with open(paths[1], "r+b") as f:  # cut shard 1 inside its last record
        f.truncate(int(_record_offsets(paths[1])[0][PER - 1]) + 30)
    with open(paths[2], "r+b") as f:  # record 2 of shard 2: a huge length whose CRC is right
        hdr = struct.pack("<Q", 1 << 40)
        f.seek(int(_record_offsets(paths[2])[0][2]))
        f.write(hdr + struct.pack("<I", _image.masked_crc32c(hdr)))
    src = fastq.sources.TFRecord(paths)
    # records before each break stay readable; each break is one failing sample
    assert len(src) == (5 + 1) + (PER - 1 + 1) + (2 + 1)
    broken = [5, 6 + PER - 1, len(src) - 1]
    msgs = []
    for i in broken:  # shard(len, i) is exactly sample i
        e = _first_error(src.shard(len(src), i), batch_size=1)
        assert isinstance(e, errors.ReadError)
        msgs.append((e.index, e.path, str(e)))
    assert [m[0] for m in msgs] == broken
    assert "record 5" in msgs[0][2] and "length CRC mismatch" in msgs[0][2] and msgs[0][1] == paths[0]
    assert f"record {PER - 1}" in msgs[1][2] and "truncated shard" in msgs[1][2] and msgs[1][1] == paths[1]
    assert "record 2" in msgs[2][2] and str(1 << 40) in msgs[2][2] and msgs[2][1] == paths[2]
    assert not any(p_.endswith(".fqidx") for p_ in os.listdir(tmp_path))  # broken shards are not cached
    n, st = _skip_stats(src)
    assert n == len(src) and st["skipped"] == 3


def test_truncated_gzip_shard(data, tmp_path):
    p = str(tmp_path / "t.gz")
    with open(data["gz"][0], "rb") as f:
        raw = f.read()
    with open(p, "wb") as f:
        f.write(raw[: len(raw) * 2 // 3])
    src = fastq.sources.TFRecord([p], compression="GZIP")
    assert 1 <= len(src) <= PER
    e = _first_error(src, batch_size=1)
    assert "truncated" in str(e) and p in str(e)


def _write_examples(path, examples):
    with tf.io.TFRecordWriter(path) as w:
        for e in examples:
            w.write(e)


def test_missing_key_and_wrong_type(data, tmp_path):
    with open(data["jpegs"][0], "rb") as f:
        jpg = f.read()
    F = tf.train.Feature
    good = _example(jpg, 3, 0)
    no_label = tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": F(bytes_list=tf.train.BytesList(value=[jpg]))})).SerializeToString()
    float_label = tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": F(bytes_list=tf.train.BytesList(value=[jpg])),
        "image/class/label": F(float_list=tf.train.FloatList(value=[1.0]))})).SerializeToString()
    two_images = tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": F(bytes_list=tf.train.BytesList(value=[jpg, jpg])),
        "image/class/label": F(int64_list=tf.train.Int64List(value=[1]))})).SerializeToString()
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
    cases = [(no_label, "'image/class/label' is missing"),
             (float_label, "'image/class/label' holds a float_list, expected an int64_list"),
             (two_images, "'image/encoded' has 2 values, expected 1")]
    for k, (bad, msg) in enumerate(cases):
        with pytest.raises(tf.errors.InvalidArgumentError):  # TF rejects it too
            tf.io.parse_single_example(bad, spec)
        p = str(tmp_path / f"s{k}")
        _write_examples(p, [good, good, bad, good])
        e = _first_error(fastq.sources.TFRecord([p]), batch_size=1)
        assert isinstance(e, errors.DecodeError)
        assert f"shard '{p}', record 2" in str(e) and msg in str(e)
        n, st = _skip_stats(fastq.sources.TFRecord([p]))
        assert n == 4 and st["skipped_by_reason"] == {"FQ_E_DECODE": 1}


_FUZZ_FEATS = [("image/encoded", "bytes", 1), ("image/class/label", "int64", 1),
               ("image/object/bbox/xmin", "float32", 2)]
_FUZZ_SPEC = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
              "image/class/label": tf.io.FixedLenFeature([], tf.int64),
              "image/object/bbox/xmin": tf.io.FixedLenFeature([2], tf.float32)}
_SEED_EXAMPLE = _example(b"\xff\xd8 not really a jpeg \xff\xd9", 7, 3)


@st.composite
def mutated(draw):
    b = bytearray(_SEED_EXAMPLE)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        pos = draw(st.integers(0, max(len(b) - 1, 0)))
        if op == "flip" and b:
            b[pos] ^= draw(st.integers(1, 255))
        elif op == "cut":
            del b[pos:]
        elif op == "insert":
            b[pos:pos] = draw(st.binary(min_size=1, max_size=6))
        elif op == "delete":
            del b[pos:pos + draw(st.integers(1, 6))]
    return bytes(b)


# found by this test in a CI run: a map entry whose first field is neither key nor value
# (tag 206, fixed32), then a key and no value; fastq skipped it, TensorFlow's fast parser
# rejects the Example
_ENTRY_WITHOUT_VALUE = (
    b"\n\xb5\x01\n&\n\x16image/object/bbox/xmin\x12\x0c\x12\n\n\x08\xb7m\xdb>\xbct\x93\xbb\n,\n\r"
    b"image/encoded\x12\x1b\n\x19\n\x17\xff\xd8 not really a jpeg \xff\xd9\n\x18\xf5\x0cimage/format\x12\x08"
    b"\n\x06\n\x04jpeg\n'\n\x0eimage/extra/id\x12\x15\x1a\x13\n\x11\x03\xfd\xff\xff\xff\xff\xff\xff\xff"
    b"\xff\x01\x83\x80\x80\x80\x80 \n\x1a\n\x11image/class/label\x12\x05\x1a\x03\n\x01\x07")


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(mutated(), st.binary(max_size=64)))
@example(_ENTRY_WITHOUT_VALUE)
@example(b"\n\x0c\n\n\n\x08image/id")              # an entry with a key only
@example(b"\n\x08\x10\x01\n\x04\n\x02\n\x00")          # Features holding a varint field
def test_fuzzed_protobuf_never_crashes_and_agrees_with_tf(blob):
    try:
        ours = _image.parse_example(blob, _FUZZ_FEATS)
    except errors.DecodeError:
        ours = None
    try:
        ref = tf.io.parse_single_example(blob, _FUZZ_SPEC)
        ref = {k: v.numpy() for k, v in ref.items()}
    except (tf.errors.InvalidArgumentError, UnicodeDecodeError):  # TF's error text can hold the raw bytes
        ref = None
    if ours is not None and ref is not None:
        assert ours[0] == ref["image/encoded"]
        assert ours[1].tolist() == [ref["image/class/label"]]
        np.testing.assert_array_equal(ours[2], ref["image/object/bbox/xmin"])
    if ours is not None:  # whatever we accept, TF accepts too
        assert ref is not None


def test_keras_fit_and_tf_distribute_shards(data):
    """The docs' examples in small: Keras model.fit from TFRecord shards, and
    the per-input-pipeline shards fastq.tf.shard_source gives tf.distribute."""
    import fastq.tf
    src = fastq.sources.TFRecord(data["paths"])
    pipe = fastq.Pipeline(src, batch_size=4, shuffle=True, seed=0, ops=[ops.Resize((16, 16))])
    model = tf.keras.Sequential([tf.keras.Input((16, 16, 3)), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(1000)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(fastq.tf.dataset(pipe), epochs=2, shuffle=False, verbose=0)
    assert len(hist.history["loss"]) == 2 and np.isfinite(hist.history["loss"]).all()
    pipe.close()
    seen = []
    for i in range(3):
        ctx = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=i, num_replicas_in_sync=3)
        with fastq.Pipeline(fastq.tf.shard_source(src, ctx), batch_size=2, return_index=True,
                            ops=[ops.Resize((8, 8))]) as p:
            for _, lab, idx in fastq.tf.dataset(p):
                np.testing.assert_array_equal(lab.numpy(), data["labels"][idx.numpy()])
                seen += idx.numpy().tolist()
    assert sorted(seen) == list(range(N))
