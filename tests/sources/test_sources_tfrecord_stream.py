"""fastq.sources.TFRecord(index=False): shards read as a stream, with no record
index.  The epoch order (shards permuted by (seed, epoch), records in shard
order, a bounded shuffle buffer) is checked against an independent pure-Python
model; record contents against TF's own reader and parser
(tf.data.TFRecordDataset + tf.io.parse_single_example); images against the
Files source on the same JPEGs and seed; worker-count determinism, resume,
shard(n, i), exactly-once delivery, the bound on held records, bad input."""
import os
import shutil

import numpy as np
import pytest

import fastq
from fastq._native import _image
from fastq import errors, ops
from fastq.bench import testdata

import tensorflow as tf

pytestmark = pytest.mark.tf

N = 40
SHARDS = 4
PER = N // SHARDS
BUF = 6
CHAIN = [ops.RandomResizedCrop(32), ops.HorizontalFlip()]
FEATS = {"image/object/bbox/xmin": ("float32", 2)}


def _example(data, label, i):
    f = tf.train.Feature
    return tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": f(bytes_list=tf.train.BytesList(value=[data])),
        "image/class/label": f(int64_list=tf.train.Int64List(value=[label])),
        "image/object/bbox/xmin": f(float_list=tf.train.FloatList(value=[i / 7.0, -1.5e-3 * i])),
    })).SerializeToString()


def _write(d, name, records, compression=None):
    opts = tf.io.TFRecordOptions(compression_type=compression) if compression else None
    p = os.path.join(d, name)
    with tf.io.TFRecordWriter(p, opts) as w:
        for r in records:
            w.write(r)
    return p


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("tfrs")
    jpegs = testdata.make_jpeg_dataset(str(d / "jpg"), N, seed=11, min_side=40, max_side=90)
    labels = (np.arange(N) * 31) % 1000
    recs = []
    for i in range(N):
        with open(jpegs[i], "rb") as f:
            recs.append(_example(f.read(), int(labels[i]), i))
    os.makedirs(d / "plain")
    os.makedirs(d / "gz")
    paths = [_write(str(d / "plain"), f"s-{s}", recs[s * PER:(s + 1) * PER]) for s in range(SHARDS)]
    gz = [_write(str(d / "gz"), f"s-{s}", recs[s * PER:(s + 1) * PER], "GZIP") for s in range(SHARDS)]
    return dict(jpegs=jpegs, labels=labels, paths=paths, gz=gz, dir=str(d))


def tf_reference(paths, compression=None):
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64),
            "image/object/bbox/xmin": tf.io.FixedLenFeature([2], tf.float32)}
    return [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
            for r in tf.data.TFRecordDataset(paths, compression_type=compression or "")]


def model_order(counts, seed, epoch, buffer):
    """The documented rule, written independently of fastq: shards permuted, a
    shuffle buffer of `buffer` records (tf.data's rule: once full, each new
    record replaces the one emitted from a random slot; at the end the rest is
    emitted at random), all draws from numpy's default_rng([seed, epoch, TAG])."""
    rng = np.random.default_rng([seed, epoch, 0x54465253])
    starts = [sum(counts[:s]) for s in range(len(counts))]
    perm = [int(s) for s in rng.permutation(len(counts))]
    stream = [starts[s] + r for s in perm for r in range(counts[s])]
    b = min(buffer, len(stream))
    fill = [int(x) for x in rng.integers(0, b, size=len(stream) - b)]
    drain = [int(x) for x in rng.integers(0, np.arange(b, 0, -1))]
    buf, out = list(stream[:b]), []
    for t, rec in enumerate(stream[b:]):
        out.append(buf[fill[t]])
        buf[fill[t]] = rec
    for k in drain:
        out.append(buf[k])
        buf[k] = buf[-1]
        buf.pop()
    assert not buf
    return out


def run(src, **kw):
    kw.setdefault("ops", CHAIN)
    kw.setdefault("batch_size", 4)
    kw.setdefault("drop_remainder", False)
    with fastq.Pipeline(src, **kw) as p:
        return [tuple(np.array(a) for a in b) for b in p]


def cat(batches, k):
    return np.concatenate([b[k] for b in batches])


def test_epoch_order_equals_python_model(tmp_path):
    counts = [0, 37, 1, 100, 13, 5]
    paths = [_write(str(tmp_path), f"t{s}", [b"x%d" % i for i in range(c)]) for s, c in enumerate(counts)]
    for buf in (1, 3, 16, 500):
        src = fastq.sources.TFRecord(paths, index=False, shuffle_buffer=buf)
        assert len(src) == sum(counts) and src.record_counts.tolist() == counts
        for seed, epoch in ((0, 0), (0, 1), (7, 3)):
            got = src.stream_order(seed, epoch).tolist()
            assert got == model_order(counts, seed, epoch, buf)
            assert sorted(got) == list(range(sum(counts)))
        assert src.stream_order(1, 0, shuffle=False).tolist() == list(range(sum(counts)))
    # a buffer of 1 keeps each shard's records in order: only the shards move
    one = fastq.sources.TFRecord(paths, index=False, shuffle_buffer=1).stream_order(2, 5).tolist()
    runs = [one[0]]
    for a, b in zip(one, one[1:]):
        if b != a + 1:
            runs.append(b)
    assert len(runs) <= len([c for c in counts if c])
    assert not any(p.endswith(".fqidx") for p in os.listdir(tmp_path))  # no index is built or cached


@pytest.mark.parametrize("comp", [None, "GZIP"])
def test_delivered_order_and_contents(data, comp):
    paths = data["gz"] if comp else data["paths"]
    ref = tf_reference(paths, comp)
    files = run(fastq.sources.Files(data["jpegs"]), seed=3, workers=2, batch_size=N)  # images by index, epoch 0
    src = fastq.sources.TFRecord(paths, index=False, shuffle_buffer=BUF, compression=comp, features=FEATS)
    outs = {w: run(src, seed=3, shuffle=True, workers=w, return_index=True) for w in (1, 2)}
    want = model_order([PER] * SHARDS, 3, 0, BUF)
    for w, out in outs.items():
        idx = cat(out, 3)
        assert idx.tolist() == want  # the delivered order is the model's
        np.testing.assert_array_equal(cat(out, 1), [ref[i]["image/class/label"] for i in idx])
        np.testing.assert_array_equal(cat(out, 2), np.stack([ref[i]["image/object/bbox/xmin"] for i in idx]))
        assert cat(out, 0).tobytes() == files[0][0][idx].tobytes()  # same decode + augmentation per index
    assert cat(outs[1], 0).tobytes() == cat(outs[2], 0).tobytes()


def test_every_record_once_per_epoch_and_epochs_differ(data):
    src = fastq.sources.TFRecord(data["paths"], index=False, shuffle_buffer=BUF)
    with fastq.Pipeline(src, ops=CHAIN, batch_size=4, seed=1, shuffle=True, workers=2, return_index=True,
                        drop_remainder=False) as p:
        idx = np.concatenate([np.array(b[2]) for b in p.repeat(2)])
    assert len(idx) == 2 * N
    assert sorted(idx[:N].tolist()) == sorted(idx[N:].tolist()) == list(range(N))
    assert idx[:N].tolist() == model_order([PER] * SHARDS, 1, 0, BUF)
    assert idx[N:].tolist() == model_order([PER] * SHARDS, 1, 1, BUF)


def test_held_records_stay_bounded_and_nothing_is_read_twice(data):
    for workers, io in ((1, 0), (3, 0), (2, 2)):
        src = fastq.sources.TFRecord(data["paths"], index=False, shuffle_buffer=BUF, io_threads=io, read_ahead=4)
        with fastq.Pipeline(src, ops=CHAIN, batch_size=4, seed=9, shuffle=True, workers=workers) as p:
            n = sum(len(b[0]) for b in p)
            st = src.stream_stats()
        assert n == N
        # every record came off a sequential cursor (no random access, no rescans) ...
        assert st["streamed"] == N and st["random"] == 0, st
        # ... and at most the shuffle buffer plus what workers / read-ahead claim out of order was held
        assert st["max_held"] <= BUF + workers + (4 if io else 0), st


def test_resume_shards_and_explain(data):
    src = fastq.sources.TFRecord(data["paths"], index=False, shuffle_buffer=BUF)
    kw = dict(ops=CHAIN, batch_size=4, seed=5, shuffle=True, workers=2)
    with fastq.Pipeline(src, **kw) as p:
        it = iter(p)
        [next(it) for _ in range(3)]
        state = p.state_dict()
        rest = [tuple(np.array(a) for a in b) for b in it]
        ex = p.explain(0, 17)
    with fastq.Pipeline(src, **kw) as q:
        q.load_state_dict(state)
        got = [tuple(np.array(a) for a in b) for b in q]
        st = src.stream_stats()
    assert len(got) == len(rest) == N // 4 - 3
    for a, b in zip(got, rest):
        assert a[0].tobytes() == b[0].tobytes() and a[1].tolist() == b[1].tolist()
    assert st["random"] == 0 and st["streamed"] == N - 12  # the resumed run skips what was delivered
    with fastq.Pipeline(fastq.sources.Files(data["jpegs"], labels=data["labels"]), **kw) as f:
        assert f.explain(0, 17) == ex
    seen = []
    for i in range(3):
        out = run(src.shard(3, i), return_index=True, seed=2, shuffle=True, workers=2)
        idx = cat(out, 2)
        np.testing.assert_array_equal(cat(out, 1), data["labels"][idx])
        assert idx.tolist() == [j for j in model_order([PER] * SHARDS, 2, 0, BUF) if j % 3 == i]
        seen += idx.tolist()
    assert sorted(seen) == list(range(N))


def _copy(data, tmp_path):
    out = []
    for p in data["paths"]:
        q = str(tmp_path / os.path.basename(p))
        shutil.copy(p, q)
        out.append(q)
    return out


def test_bad_records(data, tmp_path):
    paths = _copy(data, tmp_path)
    o, ln, _ = _image.tfrecord_scan(paths[1])
    with open(paths[1], "r+b") as f:  # flip a byte in record 3's data
        pos = int(o[3]) + 12 + int(ln[3]) // 2
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0x20]))
    o2, _, _ = _image.tfrecord_scan(paths[2])
    with open(paths[2], "r+b") as f:  # cut shard 2 inside record 6
        f.truncate(int(o2[6]) + 20)
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset([paths[1]]))
    src = fastq.sources.TFRecord(paths, index=False, shuffle_buffer=BUF)
    assert src.record_counts.tolist() == [PER, PER, 6 + 1, PER]  # the break is one sample
    for i, (shard, rec, what) in ((PER + 3, (1, 3, "data CRC mismatch")), (2 * PER + 6, (2, 6, "truncated shard"))):
        with pytest.raises(errors.FastqError) as ei:
            run(src.shard(len(src), i), workers=2, batch_size=1)
        e = ei.value
        assert isinstance(e, errors.ReadError) and e.index == i and e.path == paths[shard]
        assert f"shard '{paths[shard]}', record {rec}" in str(e) and what in str(e)
        assert src.location(i) == (paths[shard], rec)
    with fastq.Pipeline(src, ops=CHAIN, batch_size=4, seed=4, shuffle=True, on_error="skip",
                        drop_remainder=False) as p:
        n = sum(len(b[0]) for b in p)
        st = p.stats()
    assert n == len(src) and st["skipped"] == 2


def test_options_are_checked(data):
    with pytest.raises(ValueError, match="shuffle_buffer"):
        fastq.sources.TFRecord(data["paths"], shuffle_buffer=4)
    with pytest.raises(ValueError, match="shuffle_buffer"):
        fastq.sources.TFRecord(data["paths"], index=False, shuffle_buffer=0)
    with pytest.raises(ValueError, match="only with index=False"):
        fastq.sources.TFRecord(data["paths"]).stream_order(0, 0)


def test_hold_cap_fallback_reads_the_same_records(data):
    """With the hold table capped at 2 records the cursor cannot keep the
    shuffle buffer's records: they are read by walking their shard from its
    start.  Same order and contents as TF's reader, fewer records held."""
    ref = tf_reference(data["paths"])
    src = fastq.sources.TFRecord(data["paths"], index=False, shuffle_buffer=BUF, features=FEATS)
    src._stream_args = src._stream_args[:-2] + (2, 0)  # hold_cap, uncompressed
    with fastq.Pipeline(src, ops=CHAIN, batch_size=4, drop_remainder=False, seed=6, shuffle=True, workers=2,
                        return_index=True) as p:
        out = [tuple(np.array(a) for a in b) for b in p]
        st = src.stream_stats()
    idx = cat(out, 3)
    assert idx.tolist() == model_order([PER] * SHARDS, 6, 0, BUF)
    np.testing.assert_array_equal(cat(out, 1), [ref[i]["image/class/label"] for i in idx])
    np.testing.assert_array_equal(cat(out, 2), np.stack([ref[i]["image/object/bbox/xmin"] for i in idx]))
    assert st["max_held"] <= 2 and st["random"] > 0 and st["streamed"] + st["random"] == N, st
    full = run(fastq.sources.TFRecord(data["paths"], index=False, shuffle_buffer=BUF), seed=6, shuffle=True,
               workers=1)
    assert cat(out, 0).tobytes() == cat(full, 0).tobytes()


def test_gzip_and_zlib_shards_are_inflated_as_a_stream(data, tmp_path):
    """index=False reads GZIP / ZLIB shards by inflating them incrementally
    (nothing is decompressed up front): same records as TF's reader; a
    multi-member GZIP file (as `cat a.gz b.gz` makes) reads as one shard; a
    truncated or corrupt compressed stream keeps the records before it and is
    one failing sample naming the shard."""
    zl = [_write(str(tmp_path), f"z{s}", [r.numpy() for r in tf.data.TFRecordDataset([p])], "ZLIB")
          for s, p in enumerate(data["paths"])]
    for comp, paths in (("GZIP", data["gz"]), ("ZLIB", zl)):
        ref = tf_reference(paths, comp)
        src = fastq.sources.TFRecord(paths, index=False, shuffle_buffer=BUF, compression=comp, features=FEATS)
        assert src._stream_args[1] == [None] * SHARDS  # no shard held in memory
        assert src.record_counts.tolist() == [PER] * SHARDS
        out = run(src, seed=8, shuffle=True, workers=2, return_index=True)
        idx = cat(out, 3)
        assert idx.tolist() == model_order([PER] * SHARDS, 8, 0, BUF)
        np.testing.assert_array_equal(cat(out, 1), [ref[i]["image/class/label"] for i in idx])
        np.testing.assert_array_equal(cat(out, 2), np.stack([ref[i]["image/object/bbox/xmin"] for i in idx]))
    multi = str(tmp_path / "multi.gz")
    with open(multi, "wb") as f:
        for p in data["gz"][:2]:
            with open(p, "rb") as g:
                f.write(g.read())
    ref = tf_reference([multi], "GZIP")
    src = fastq.sources.TFRecord([multi], index=False, compression="GZIP", shuffle_buffer=3)
    assert len(src) == len(ref) == 2 * PER
    out = run(src, seed=1, shuffle=True, workers=2, return_index=True)
    np.testing.assert_array_equal(cat(out, 1), [ref[i]["image/class/label"] for i in cat(out, 2)])
    cut = str(tmp_path / "cut.gz")
    with open(data["gz"][0], "rb") as g:
        raw = g.read()
    with open(cut, "wb") as f:
        f.write(raw[:len(raw) * 2 // 3])
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset([cut], compression_type="GZIP"))
    src = fastq.sources.TFRecord([cut], index=False, compression="GZIP", shuffle_buffer=3)
    k = len(src) - 1
    assert 0 < k < PER
    with pytest.raises(errors.ReadError) as ei:
        run(src.shard(len(src), k), workers=1, batch_size=1)
    assert f"shard '{cut}', record {k}" in str(ei.value) and "truncated GZIP stream" in str(ei.value)
    with fastq.Pipeline(src, ops=CHAIN, batch_size=2, on_error="skip", drop_remainder=False) as p:
        assert sum(len(b[0]) for b in p) == len(src) and p.stats()["skipped"] == 1
    bad = str(tmp_path / "bad.gz")
    with open(bad, "wb") as f:
        f.write(raw[:len(raw) // 2] + bytes(b ^ 0x55 for b in raw[len(raw) // 2:len(raw) // 2 + 64])
                + raw[len(raw) // 2 + 64:])
    src = fastq.sources.TFRecord([bad], index=False, compression="GZIP", shuffle_buffer=3)
    with fastq.Pipeline(src, ops=CHAIN, batch_size=2, on_error="skip", drop_remainder=False) as p:
        assert sum(len(b[0]) for b in p) == len(src) and p.stats()["skipped"] >= 1
