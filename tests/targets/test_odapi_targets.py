"""fastq.sources.TFRecord(targets=fastq.targets.OdapiTargets(...)): OD-API boxes and
classes read natively with each record (variable-length lists, csrc/records/fq_example.c)
and moved with the image from its explain record (csrc/task/fq_imgtask_reader_boxes.c).

Checked against independent paths: shards written by TensorFlow's own TFRecordWriter /
tf.train.Example and parsed back by tf.io.parse_single_example (marker tf), then moved
by fastq.targets.transform_boxes from each row's explain record; the Files source over
the same JPEGs with Targets.from_annotations(load_odapi(shards)); 1 vs 2 workers; the
stream mode; bad records (errors naming shard and record, or counted skips)."""
import os

import numpy as np
import pytest

import fastq
import fastq.ops as O
from fastq._native import _image
from fastq import errors
from helpers.determinism import rows_by_index  # noqa: I100
from fastq import targets as T
from fastq.annotations.odapi import BBOX_KEYS, CLASS_KEY, encode_odapi_example, load_odapi
from fastq.tfrecord_codec import encode_example, tfrecord_frame

N = 14
OPS = [O.RandomResizedCrop(56, scale=(0.3, 1.0)), O.HorizontalFlip(), O.Pad(size=(64, 64))]
OPS2 = [O.ResizeShortestEdge([40, 56], max_size=80), O.HorizontalFlip(), O.Pad(size=(80, 80))]
KW = dict(max_boxes=5, min_area=2.0)


def _samples(seed=0):
    """N JPEGs of various sizes with 0..8 boxes each (sample 3: 8 boxes > max_boxes)."""
    import cv2
    rng = np.random.default_rng(seed)
    out = []
    for i in range(N):
        h, w = int(rng.integers(40, 100)), int(rng.integers(40, 100))
        img = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
        n = 8 if i == 3 else (0 if i == 5 else int(rng.integers(1, 5)))
        x0, y0 = rng.uniform(0, w - 8, n), rng.uniform(0, h - 8, n)
        b = np.stack([x0, y0, x0 + rng.uniform(2, w - x0), y0 + rng.uniform(2, h - y0)], 1).reshape(-1, 4)
        out.append({"jpeg": cv2.imencode(".jpg", img)[1].tobytes(), "h": h, "w": w, "boxes": b,
                    "classes": rng.integers(1, 91, n)})
    return out


def _normalized(s):
    """The stored columns (float32, normalized), as encode_odapi_example stores them."""
    b = s["boxes"]
    return [(b[:, 0] / s["w"]).astype(np.float32), (b[:, 1] / s["h"]).astype(np.float32),
            (b[:, 2] / s["w"]).astype(np.float32), (b[:, 3] / s["h"]).astype(np.float32)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("odapi")
    samples = _samples()
    shards, jpegs = [], []
    for s, part in enumerate((range(0, 8), range(8, N))):
        p = d / f"fq-{s}.tfrecord"
        p.write_bytes(b"".join(tfrecord_frame(encode_odapi_example(samples[i]["jpeg"], samples[i]["h"],
                                                                   samples[i]["w"], samples[i]["boxes"],
                                                                   samples[i]["classes"])) for i in part))
        shards.append(str(p))
    for i, s in enumerate(samples):
        jp = d / f"{i:03d}.jpg"
        jp.write_bytes(s["jpeg"])
        jpegs.append(str(jp))
    return {"dir": d, "samples": samples, "shards": shards, "jpegs": jpegs}


_rows = rows_by_index


def _pipe(src, ops=OPS, **kw):
    return fastq.Pipeline(src, batch_size=4, ops=ops, dtype="uint8", seed=7, shuffle=True, return_index=True,
                          drop_remainder=False, **kw)


def _check_rows(pipe, rows, boxes, classes):
    """Every row's targets == transform_boxes(explain, boxes[idx], classes[idx]) + image_info."""
    assert len(rows) == N
    assert sum(int(r[3]) for r in rows.values()) >= N  # boxes survive: the comparison is not of empty rows
    for idx, r in rows.items():
        ex = pipe.explain(0, idx)
        want = T.transform_boxes(ex, boxes[idx], classes[idx], **KW)
        np.testing.assert_array_equal(r[1], want["boxes"])
        np.testing.assert_array_equal(r[2], want["classes"])
        assert r[3] == want["num_boxes"]
        np.testing.assert_array_equal(r[4], T.image_info(ex))


# ----------------------------------------------------------------------- parser

def test_varlen_parser_counts_truncates_and_refuses():
    ex = encode_example({"f": np.float32([0.5, 1.5, 2.5]), "i": np.int64([1, -2]), "e": np.float32([])})
    V, TR = _image.TFR_VARLEN, _image.TFR_TRUNCATE
    (f, nf), (i, ni), (e, ne), (m, nm) = _image.parse_example(
        ex, [("f", "float32", 4, V), ("i", "int64", 2, V), ("e", "float32", 3, V), ("missing", "int64", 3, V)])
    np.testing.assert_array_equal(f, [0.5, 1.5, 2.5])
    np.testing.assert_array_equal(i, [1, -2])
    assert (nf, ni, ne, nm) == (3, 2, 0, 0) and len(e) == 0 and len(m) == 0
    (f, nf), = _image.parse_example(ex, [("f", "float32", 2, V | TR)])
    np.testing.assert_array_equal(f, [0.5, 1.5])
    assert nf == 3
    with pytest.raises(errors.FastqError, match="'f' has 3 values, at most 2 allowed"):
        _image.parse_example(ex, [("f", "float32", 2, V)])
    with pytest.raises(errors.FastqError, match="'i' holds an int64_list, expected a float_list"):
        _image.parse_example(ex, [("i", "float32", 4, V)])
    with pytest.raises(ValueError, match="at most"):
        _image.parse_example(ex, [("f", "float32", (1 << 24) + 1, V)])


def test_varlen_parser_on_mutated_records_never_overreads():
    """Random byte flips / cuts / varint blowups of an OD-API record: the parser either
    errors or returns at most the capacity, with a count that agrees with fastq.tfrecord_codec'
    pure-Python parser whenever both accept it."""
    from fastq.tfrecord_codec import parse_example as py_parse
    s = _samples(3)[3]
    base = encode_odapi_example(s["jpeg"][:40], s["h"], s["w"], s["boxes"], s["classes"])
    feats = [(k, "float32", 6, _image.TFR_VARLEN | _image.TFR_TRUNCATE) for k in BBOX_KEYS] + \
        [(CLASS_KEY, "int64", 8, _image.TFR_VARLEN)]
    rng = np.random.default_rng(0)
    ok = 0
    for it in range(3000):
        b = bytearray(base)
        for _ in range(int(rng.integers(1, 4))):
            op, pos = int(rng.integers(0, 3)), int(rng.integers(0, max(len(b), 1)))
            if op == 0 and b:
                b[pos] = int(rng.integers(0, 256))
            elif op == 1:
                del b[pos:pos + int(rng.integers(1, 40))]
            else:
                b[pos:pos] = b"\xff" * int(rng.integers(1, 11))
        try:
            out = _image.parse_example(bytes(b), feats)
        except errors.FastqError:
            continue
        ok += 1
        for (vals, n), (key, _, cap, _f) in zip(out, feats):
            assert len(vals) == min(n, cap) and n >= 0
            try:
                ref = py_parse(bytes(b), [key]).get(key, [])
            except Exception:
                continue
            assert n == len(ref)
    assert ok > 100


# --------------------------------------------------------------- the pipelines

def test_odapi_targets_match_files_with_targets_from_annotations(data):
    """fastq-encoded shards: TFRecord+OdapiTargets == Files+Targets.from_annotations(load_odapi)
    on every output, for 1 and 2 workers; and == transform_boxes of each explain record."""
    ann = load_odapi(data["shards"])
    outs = []
    for workers in (1, 2):
        src = fastq.sources.TFRecord(data["shards"], label_key=None, targets=T.OdapiTargets(**KW))
        with _pipe(src, workers=workers) as p:
            assert [s for s, _ in p.output_spec] == [(64, 64, 3), (5, 4), (5,), (), (4, 2), ()]
            rows = _rows(p)
            boxes = [ann.sample(i)["boxes"] for i in range(N)]
            classes = [ann.sample(i)["classes"] for i in range(N)]
            _check_rows(p, rows, boxes, classes)
            assert p.stats()["boxes_truncated"] > 0  # sample 3: 8 boxes, max_boxes 5
        files = fastq.sources.Files(data["jpegs"], targets=T.Targets.from_annotations(ann, **KW))
        with _pipe(files, workers=workers) as f:
            frows = _rows(f)
        for idx in range(N):
            for a, b in zip(rows[idx], frows[idx]):
                np.testing.assert_array_equal(a, b)
        outs.append(rows)
    for idx in range(N):
        for a, b in zip(outs[0][idx], outs[1][idx]):
            np.testing.assert_array_equal(a, b)


def test_stream_mode_read_ahead_and_absolute_coordinates(data, tmp_path):
    """index=False and io_threads=2 give each sample the same outputs as the indexed reader; normalized=False
    takes the stored values as pixels (a shard written with pixel coordinates)."""
    src = fastq.sources.TFRecord(data["shards"], label_key=None, targets=T.OdapiTargets(**KW))
    with _pipe(src, ops=OPS2) as p:
        rows = _rows(p)
    stream = fastq.sources.TFRecord(data["shards"], label_key=None, index=False, targets=T.OdapiTargets(**KW))
    with _pipe(stream, ops=OPS2, workers=2) as q:
        srows = _rows(q)
    ra = fastq.sources.TFRecord(data["shards"], label_key=None, io_threads=2, targets=T.OdapiTargets(**KW))
    with _pipe(ra, ops=OPS2, workers=2) as q:
        rarows = _rows(q)  # the read-ahead reader hands the box lists on too
    assert sorted(srows) == list(range(N)) == sorted(rarows)
    for idx in range(N):
        for a, b, c in zip(rows[idx], srows[idx], rarows[idx]):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(a, c)
    shard = tmp_path / "abs.tfrecord"
    recs = []
    for s in data["samples"]:
        b = s["boxes"].astype(np.float32)
        recs.append(encode_example({"image/encoded": s["jpeg"], BBOX_KEYS[0]: b[:, 0], BBOX_KEYS[1]: b[:, 1],
                                    BBOX_KEYS[2]: b[:, 2], BBOX_KEYS[3]: b[:, 3],
                                    CLASS_KEY: s["classes"].astype(np.int64)}))
    shard.write_bytes(b"".join(tfrecord_frame(r) for r in recs))
    src = fastq.sources.TFRecord([str(shard)], label_key=None, targets=T.OdapiTargets(normalized=False, **KW))
    with _pipe(src, ops=OPS2) as p:
        _check_rows(p, _rows(p), [s["boxes"].astype(np.float32) for s in data["samples"]],
                    [s["classes"] for s in data["samples"]])


@pytest.mark.tf
def test_tf_written_shards_match_tf_parse_single_example(data, tmp_path):
    """Shards from tf.io.TFRecordWriter + tf.train.Example; the reference boxes are TF's
    parse_single_example (VarLenFeature) denormalized with the decoded size, moved by
    transform_boxes from each row's explain record; also with a label and a feature."""
    tf = pytest.importorskip("tensorflow", reason="TF writes and parses the reference shards (requirements-dev.txt)")
    f = tf.train.Feature
    paths = []
    for s_i, part in enumerate((range(0, 6), range(6, N))):
        p = str(tmp_path / f"tf-{s_i}.tfrecord")
        with tf.io.TFRecordWriter(p) as w:
            for i in part:
                s = data["samples"][i]
                cols = _normalized(s)
                feat = {"image/encoded": f(bytes_list=tf.train.BytesList(value=[s["jpeg"]])),
                        "image/height": f(int64_list=tf.train.Int64List(value=[s["h"]])),
                        "image/width": f(int64_list=tf.train.Int64List(value=[s["w"]])),
                        "image/class/label": f(int64_list=tf.train.Int64List(value=[i % 3])),
                        CLASS_KEY: f(int64_list=tf.train.Int64List(value=s["classes"].tolist()))}
                for k, c in zip(BBOX_KEYS, cols):
                    feat[k] = f(float_list=tf.train.FloatList(value=c.tolist()))
                w.write(tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString())
        paths.append(p)
    spec = {k: tf.io.VarLenFeature(tf.float32) for k in BBOX_KEYS}
    spec[CLASS_KEY] = tf.io.VarLenFeature(tf.int64)
    boxes, classes = [], []
    for p in paths:
        for raw in tf.data.TFRecordDataset(p):
            e = tf.io.parse_single_example(raw, spec)
            cols = [tf.sparse.to_dense(e[k]).numpy() for k in BBOX_KEYS]
            boxes.append(cols)
            classes.append(tf.sparse.to_dense(e[CLASS_KEY]).numpy())
    outs = []
    for workers in (1, 2):
        src = fastq.sources.TFRecord(paths, targets=T.OdapiTargets(**KW))
        with _pipe(src, workers=workers) as p:
            assert [s for s, _ in p.output_spec][1:] == [(), (5, 4), (5,), (), (4, 2), ()]
            got = _rows(p)
            assert all(int(r[1]) == i % 3 for i, r in got.items())  # the label before the targets
            rows = {i: [r[0]] + r[2:] for i, r in got.items()}
            ref = []
            for idx in range(N):
                ex = p.explain(0, idx)
                h, w = ex["src_shape"]
                c = [x.astype(np.float64) for x in boxes[idx]]
                ref.append(np.stack([c[0] * w, c[1] * h, c[2] * w, c[3] * h], 1).astype(np.float32).reshape(-1, 4))
            _check_rows(p, rows, ref, classes)
        outs.append(rows)
    for idx in range(N):
        for a, b in zip(outs[0][idx], outs[1][idx]):
            np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ bad records

def _bad_shard(tmp_path, data, bad):
    """A shard of 4 good records with record 2 replaced by `bad` (a dict of features)."""
    recs = []
    for i in range(4):
        s = data["samples"][i]
        if i == 2:
            feats = {"image/encoded": s["jpeg"], CLASS_KEY: np.int64([1, 2])}
            feats.update({k: np.float32([0.1, 0.2]) for k in BBOX_KEYS[:2]})
            feats.update({k: np.float32([0.5, 0.6]) for k in BBOX_KEYS[2:]})
            feats.update(bad)
            recs.append(encode_example(feats))
        else:
            recs.append(encode_odapi_example(s["jpeg"], s["h"], s["w"], s["boxes"][:2], s["classes"][:2]))
    p = tmp_path / "bad.tfrecord"
    p.write_bytes(b"".join(tfrecord_frame(r) for r in recs))
    return str(p)


BAD = [
    ({CLASS_KEY: np.int64([1, 2, 3])}, {}, "object lists differ in length"),
    ({BBOX_KEYS[0]: np.float32([0.1, np.nan])}, {}, "finite"),
    ({BBOX_KEYS[3]: np.int64([1, 1])}, {}, "holds an int64_list, expected a float_list"),
    ({k: np.float32([0.1] * 7) for k in BBOX_KEYS} | {CLASS_KEY: np.int64([1] * 7)},
     {"max_objects": 6, "truncate": False}, "has 7 values, at most 6 allowed"),
    ({k: np.float32([0.1, 0.1, 0.1]) for k in BBOX_KEYS[:2]} | {k: np.float32([0.5, 0.5, 0.5]) for k in BBOX_KEYS[2:]}
     | {CLASS_KEY: np.int64([1, 2, 3])}, {"max_boxes": 2, "truncate": False}, "boxes"),
    ({CLASS_KEY: np.int64([1, 2 ** 40])}, {}, "does not fit int32"),
]


@pytest.mark.parametrize("bad,opts,msg", BAD)
def test_bad_records_name_shard_and_record_or_are_counted_skips(data, tmp_path, bad, opts, msg):
    path = _bad_shard(tmp_path, data, bad)
    kw = {"max_boxes": 5, **opts}
    src = fastq.sources.TFRecord([path], label_key=None, targets=T.OdapiTargets(**kw))
    with pytest.raises(errors.FastqError) as ei:
        with _pipe(src, ops=OPS2) as p:
            _rows(p)
    text = str(ei.value)
    assert "bad.tfrecord" in text and "record 2" in text and msg in text, text
    src = fastq.sources.TFRecord([path], label_key=None, targets=T.OdapiTargets(**kw))
    with _pipe(src, ops=OPS2, on_error="skip") as p:
        rows = _rows(p)
        st = p.stats()
    assert sum(1 for _ in rows) <= 4 and st["skipped"] >= 1


def test_targets_argument_is_checked(data):
    with pytest.raises(TypeError, match="OdapiTargets"):
        fastq.sources.TFRecord(data["shards"], targets=T.Targets([np.zeros((0, 4))] * N))
    with pytest.raises(ValueError, match="max_objects"):
        T.OdapiTargets(max_boxes=5, max_objects=3)
    with pytest.raises(ValueError, match="apart from"):
        fastq.sources.TFRecord(data["shards"], features={BBOX_KEYS[0]: ("float32", 1)},
                               targets=T.OdapiTargets(**KW))
