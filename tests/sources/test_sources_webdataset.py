"""fastq.sources.WebDataset on tar shards written by Python's tarfile (ustar,
pax and GNU formats, long names), checked against a tarfile-based reference
read and against the Files source on the same images/seed; bad tars (bad
header checksum, truncated member, path traversal names, missing/non-integer
labels) under both error policies."""
import io
import os
import tarfile

import numpy as np
import pytest

import fastq
from fastq._native import _image
from fastq import errors, ops
from fastq.bench import testdata

N = 18
CHAIN = [ops.RandomResizedCrop(40), ops.HorizontalFlip(), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]
FORMATS = (tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT, tarfile.GNU_FORMAT)


def _add(tf, name, data):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mtime = 1_700_000_000
    tf.addfile(ti, io.BytesIO(data))


def write_shards(d, jpegs, labels, per=6):
    """Shard s holds samples [per*s, per*(s+1)); names vary in depth and length
    (some > 100 characters: pax / GNU long names; ustar uses its prefix field)."""
    paths = []
    for s in range(-(-len(jpegs) // per)):
        p = os.path.join(d, f"shard-{s:04d}.tar")
        with tarfile.open(p, "w", format=FORMATS[s % 3]) as tf:
            di = tarfile.TarInfo("some/dir")
            di.type = tarfile.DIRTYPE
            tf.addfile(di)
            for i in range(per * s, min(len(jpegs), per * (s + 1))):
                long = "x" * (60 if FORMATS[s % 3] == tarfile.USTAR_FORMAT else 120)
                key = f"some/dir/{long}/{i:06d}" if i % 2 else f"sample{i:06d}"
                with open(jpegs[i], "rb") as f:
                    _add(tf, key + (".JPG" if i % 5 == 0 else ".jpg"), f.read())
                _add(tf, key + ".cls", f"{labels[i]}\n".encode())
                _add(tf, key + ".json", b'{"i": %d}' % i)
        paths.append(p)
    return paths


def tarfile_reference(paths, image_ext=("jpg", "jpeg", "png", "webp")):
    """Samples as Python's tarfile reads them: (key, image bytes, label) in order."""
    out = []
    for p in paths:
        cur, members = None, {}
        with tarfile.open(p) as tf:
            for m in tf.getmembers():
                if not m.isfile():
                    continue
                d, _, base = m.name.rpartition("/")
                stem, _, ext = base.partition(".")
                key = f"{d}/{stem}" if d else stem
                if key != cur:
                    if cur is not None:
                        out.append((cur, members))
                    cur, members = key, {}
                members[ext.lower()] = tf.extractfile(m).read()
        if cur is not None:
            out.append((cur, members))
    return [(k, next(m[e] for e in image_ext if e in m), int(m["cls"])) for k, m in out]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("wds")
    jpegs = testdata.make_jpeg_dataset(str(d / "jpg"), N, seed=4, min_side=60, max_side=140)
    labels = (np.arange(N) * 7919) % 1000 - 3  # includes a negative label
    return dict(jpegs=jpegs, labels=labels, paths=write_shards(str(d), jpegs, labels))


def run(src, **kw):
    kw.setdefault("ops", CHAIN)
    kw.setdefault("batch_size", 3)
    with fastq.Pipeline(src, **kw) as p:
        return [tuple(np.array(a) for a in b) for b in p]


def test_index_matches_tarfile_reference(data):
    ref = tarfile_reference(data["paths"])
    src = fastq.sources.WebDataset(data["paths"])
    assert len(src) == len(ref) == N
    assert src.keys == [r[0] for r in ref]
    for p in data["paths"]:  # every member the scanner lists is where tarfile says it is
        names, offs, sizes, unsafe, tail = _image.tar_scan(p)
        assert tail is None and not unsafe.any()
        with tarfile.open(p) as tf:
            files = [m for m in tf.getmembers() if m.isfile()]
        assert names == [m.name for m in files]
        assert offs.tolist() == [m.offset_data for m in files]
        assert sizes.tolist() == [m.size for m in files]
    out = run(src, ops=[ops.Resize((16, 16))], return_index=True, drop_remainder=False, workers=3)
    idx = np.concatenate([b[2] for b in out])
    assert idx.tolist() == list(range(N))
    assert np.concatenate([b[1] for b in out]).tolist() == [r[2] for r in ref]
    assert src.location(1)[0] == data["paths"][0] and src.location(7)[1:] == (1, ref[7][0])


def test_same_images_as_files_source(data):
    ref = tarfile_reference(data["paths"])
    for i, (_, img, _) in enumerate(ref):  # the reference images are the original files
        with open(data["jpegs"][i], "rb") as f:
            assert f.read() == img
    files = run(fastq.sources.Files(data["jpegs"], labels=data["labels"]), seed=2, shuffle=True, workers=2)
    for w in (1, 3):
        got = run(fastq.sources.WebDataset(data["paths"]), seed=2, shuffle=True, workers=w)
        assert len(got) == len(files) == N // 3
        for a, b in zip(got, files):
            assert a[0].tobytes() == b[0].tobytes()
            np.testing.assert_array_equal(a[1], b[1])


def test_shards_resume_and_no_label(data):
    src = fastq.sources.WebDataset(os.path.join(os.path.dirname(data["paths"][0]), "shard-*.tar"), label_ext=None)
    assert len(src) == N
    seen = []
    for i in range(4):
        out = run(src.shard(4, i), return_index=True, drop_remainder=False)
        assert len(out[0]) == 2  # image, index: no label output
        seen += np.concatenate([b[1] for b in out]).tolist()
    assert sorted(seen) == list(range(N))
    kw = dict(ops=CHAIN, batch_size=3, seed=5, shuffle=True, workers=2)
    with fastq.Pipeline(src, **kw) as p:
        it = iter(p)
        next(it)
        state = p.state_dict()
        rest = [np.array(b[0]) for b in it]
    with fastq.Pipeline(src, **kw) as q:
        q.load_state_dict(state)
        got = [np.array(b[0]) for b in q]
    assert len(got) == len(rest) == N // 3 - 1
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, rest))


def _tar(path, entries, fmt=tarfile.PAX_FORMAT):
    with tarfile.open(path, "w", format=fmt) as tf:
        for name, data in entries:
            _add(tf, name, data)
    return str(path)


def _err(src):
    with pytest.raises(errors.FastqError) as ei:
        run(src, batch_size=1, drop_remainder=False)
    return ei.value


def _skips(src):
    with fastq.Pipeline(src, ops=CHAIN, batch_size=1, drop_remainder=False, on_error="skip") as p:
        n = sum(len(b[0]) for b in p)
        return n, p.stats()


def test_bad_samples_fail_by_policy(data, tmp_path):
    with open(data["jpegs"][0], "rb") as f:
        jpg = f.read()
    cases = [
        ([("a.jpg", jpg), ("a.cls", b"1"), ("b.jpg", jpg), ("b.cls", b"x1")], "label member is not a decimal integer",
         errors.DecodeError),
        ([("a.jpg", jpg), ("a.cls", b"1"), ("b.jpg", jpg)], "no label member", errors.DecodeError),
        ([("a.jpg", jpg), ("a.cls", b"1"), ("b.txt", b"hi"), ("b.cls", b"2")], "no image member", errors.ReadError),
        ([("a.jpg", jpg), ("a.cls", b"1"), ("../b.jpg", jpg), ("../b.cls", b"2")], "unsafe member name",
         errors.ReadError),
        ([("a.jpg", jpg), ("a.cls", b"1"), ("/abs/b.jpg", jpg), ("/abs/b.cls", b"2")], "unsafe member name",
         errors.ReadError),
        ([("a.jpg", jpg), ("a.cls", b"1"), ("b.jpg", b"\xff\xd8garbage"), ("b.cls", b"2")], "",
         errors.DecodeError),
    ]
    for k, (entries, msg, exc) in enumerate(cases):
        p = _tar(tmp_path / f"c{k}.tar", entries)
        src = fastq.sources.WebDataset([p])
        assert len(src) == 2
        e = _err(src)
        assert isinstance(e, exc), (k, e)
        assert f"shard '{p}', sample 1" in str(e) and msg in str(e) and e.path == p and e.index == 1
        n, st = _skips(src)
        assert n == 2 and st["skipped"] == 1


LABEL_TEXTS = [b"7", b" +7\n", b"-0", b"007", b"\t-42\r\n", b"9223372036854775807", b"-9223372036854775808",
               b"0009223372036854775807", b"9223372036854775808", b"-9223372036854775809", b"99999999999999999999",
               b"1.5", b"", b" ", b"- 5", b"+-1", b"0x10", b"1e3", b"--1", b"12a"]


def test_label_text_is_read_as_python_int_reads_it(data, tmp_path):
    """Every label text Python's int() reads as an int64 gives that value; every
    other one (not a decimal integer, or outside int64) fails its sample."""
    with open(data["jpegs"][0], "rb") as f:
        jpg = f.read()
    entries = []
    for k, text in enumerate(LABEL_TEXTS):
        entries += [(f"k{k:03d}.jpg", jpg), (f"k{k:03d}.cls", text)]
    src = fastq.sources.WebDataset([_tar(tmp_path / "labels.tar", entries)])
    with fastq.Pipeline(src, ops=CHAIN, batch_size=1, on_error="skip", return_index=True) as p:
        got = {int(b[2][0]): int(b[1][0]) for b in p}
        st = p.stats()
    want = {}
    for k, text in enumerate(LABEL_TEXTS):
        try:
            v = int(text.decode())
        except ValueError:
            continue
        if -2**63 <= v < 2**63:
            want[k] = v
    # a failing sample is replaced by another one: check the value of every good key
    assert set(want) <= set(got) and all(got[k] == want[k] for k in want), (got, want)
    assert st["skipped"] == len(LABEL_TEXTS) - len(want)
    msgs = " ".join(st["last_skip_message"].values())
    assert "not a decimal integer" in msgs or "outside the int64 range" in msgs
    for k in (8, 9, 10):  # out of range: its own message
        e = _err(fastq.sources.WebDataset([_tar(tmp_path / f"r{k}.tar", entries[2 * k:2 * k + 2] + entries[:2])]))
        assert "label member is outside the int64 range" in str(e), e


def test_bad_checksum_and_truncated_member(data, tmp_path):
    with open(data["jpegs"][0], "rb") as f:
        jpg = f.read()
    entries = [(f"k{i}.{e}", jpg if e == "jpg" else b"%d" % i) for i in range(4) for e in ("jpg", "cls")]
    p = _tar(tmp_path / "ok.tar", entries, tarfile.USTAR_FORMAT)
    with tarfile.open(p) as tf:
        ms = tf.getmembers()
    raw = open(p, "rb").read()
    # flip a byte in the name field of member 4's header (sample 2's image)
    bad = bytearray(raw)
    bad[ms[4].offset + 1] ^= 0x01
    pc = str(tmp_path / "badsum.tar")
    open(pc, "wb").write(bytes(bad))
    with tarfile.open(pc) as tf:  # tarfile's header check agrees: it stops (silently) at that header
        assert len(tf.getmembers()) == 4
    src = fastq.sources.WebDataset([pc])
    assert len(src) == 3  # samples 0, 1 and the break
    e = _err(src)
    assert "bad tar header checksum" in str(e) and f"offset {ms[4].offset}" in str(e) and pc in str(e)
    # cut inside sample 3's image data
    pt = str(tmp_path / "trunc.tar")
    open(pt, "wb").write(raw[:ms[6].offset_data + 100])
    src = fastq.sources.WebDataset([pt])
    assert len(src) == 4
    e = _err(src)
    assert "truncated tar member" in str(e) and e.index == 3 and pt in str(e)
    n, st = _skips(src)
    assert n == 4 and st["skipped"] == 1


def test_fuzzed_tar_headers_never_crash(tmp_path):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    base = tmp_path / "base.tar"
    _tar(base, [("k0.jpg", b"j" * 700), ("k0.cls", b"1"), ("a/" + "n" * 150 + ".jpg", b"x" * 10)])
    raw = base.read_bytes()
    target = tmp_path / "fuzz.tar"

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(1, 255)), min_size=1, max_size=6),
           st.integers(0, len(raw)))
    def check(flips, cut):
        b = bytearray(raw[:max(cut, 512)])
        for pos, x in flips:
            if pos < len(b):
                b[pos] ^= x
        target.write_bytes(bytes(b))
        names, offs, sizes, unsafe, tail = _image.tar_scan(str(target))
        assert all(o + s <= len(b) for o, s in zip(offs.tolist(), sizes.tolist()))
        assert len(names) == len(offs) == len(sizes) == len(unsafe)
        if tail is not None:
            assert "offset" in tail[1]
    check()


def test_shards_written_and_read_by_webdataset(data, tmp_path):
    """Shards written by webdataset's own TarWriter; fastq's samples match what
    webdataset's own reader yields (keys, labels) and the Files source (images)."""
    import webdataset as wds
    paths = []
    for s in range(2):
        p = str(tmp_path / f"wds-{s:03d}.tar")
        with wds.TarWriter(p) as w:
            for i in range(s * 9, s * 9 + 9):
                with open(data["jpegs"][i], "rb") as f:
                    w.write({"__key__": f"n{i % 3}/s{i:06d}", "jpg": f.read(), "cls": int(data["labels"][i])})
        paths.append(p)
    ref = list(wds.WebDataset(paths, shardshuffle=False, empty_check=False))
    src = fastq.sources.WebDataset(paths)
    assert src.keys == [r["__key__"] for r in ref]
    out = run(src, ops=[ops.Resize((16, 16))], return_index=True, drop_remainder=False)
    assert np.concatenate([b[1] for b in out]).tolist() == [int(r["cls"]) for r in ref]
    files = run(fastq.sources.Files(data["jpegs"], labels=data["labels"]), seed=9, shuffle=True)
    got = run(src, seed=9, shuffle=True, workers=2)
    for a, b in zip(got, files):
        assert a[0].tobytes() == b[0].tobytes()
