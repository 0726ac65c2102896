"""Property-based tests (hypothesis) for what users feed fastq.

* Iterable sources: any shape (0-d, empty dims, many dims) and dtype (ints, floats,
  bool, complex, strings, byte-swapped, Python scalars, object, structured) of
  sample fields, and dtypes that change across samples.  Every batch must equal
  ``np.stack`` of its samples cast the way numpy casts them, or the pipeline must
  raise a clear error naming the sample; never a crash.
* Sample fields with more than 32 dimensions, run in a subprocess: they must give a
  ValueError, not overflow a fixed-size array in the bindings (issue 10).
* Encoded images (JPEG, progressive JPEG, PNG, WebP, BMP) with random byte
  mutations, fed to the decoder through ``fastq.sources.Bytes``: each buffer either
  decodes or fails with a fastq error; a pipeline gives the same rows and the same
  skips with 1 and 2 workers, and each row equals that buffer processed alone (no
  state carried from what a worker decoded before).

Bounded: every ``@given`` has a fixed max_examples and no deadline; the file runs
in well under a minute.

Bugs these tests found (all fixed, the tests guard against their return): more
than 32 dimensions overflowing a stack array, datetime64/timedelta64 units lost in
the ring, a failing cast not naming its sample, PNG header dimensions whose
product overflowed int64 and slipped past max_pixels.
"""
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fastq
from fastq._native import _image
from fastq import errors, ops

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# hypothesis keeps caches in ./.hypothesis by default: not in the checkout
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), f"fastq-hypothesis-{os.getuid()}"))

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                derandomize=True, database=None)


# -- Iterable sources: shapes and dtypes --------------------------------------------

def _field_dtypes():
    return st.one_of(hnp.integer_dtypes(endianness="?"), hnp.unsigned_integer_dtypes(endianness="?"),
                     hnp.floating_dtypes(endianness="?"), hnp.complex_number_dtypes(endianness="?"),
                     hnp.boolean_dtypes(),
                     hnp.byte_string_dtypes(min_len=1, max_len=3), hnp.unicode_string_dtypes(min_len=1, max_len=3))


# datetime64/timedelta64 are left out of the strategy above and tested on their own
# (test_datetime_units_survive_the_ring): their unit is lost today.


def _python_scalars():
    return st.one_of(st.integers(-(2 ** 70), 2 ** 70), st.floats(allow_nan=True), st.booleans(),
                     st.complex_numbers(allow_nan=False, max_magnitude=1e6))


@st.composite
def _array_field(draw, shape):
    dt = draw(_field_dtypes())
    return draw(hnp.arrays(dt, shape))


@st.composite
def uniform_samples(draw):
    """(samples, batch_size): every sample has the same field shapes/dtypes."""
    n_fields = draw(st.integers(1, 3))
    shapes = [draw(hnp.array_shapes(min_dims=0, max_dims=5, min_side=0, max_side=3)) for _ in range(n_fields)]
    dtypes = [draw(_field_dtypes()) for _ in range(n_fields)]
    n = draw(st.integers(1, 7))
    samples = []
    for _ in range(n):
        samples.append(tuple(draw(hnp.arrays(d, s)) for d, s in zip(dtypes, shapes)))
    return samples, draw(st.integers(1, 3))


def _native(dt):
    return dt.newbyteorder("=")


def _collect(samples, batch_size, workers, drop_remainder=False):
    """Rows delivered before an error, and the error (or None)."""
    rows = []
    try:
        with fastq.Pipeline(samples, batch_size=batch_size, workers=workers, drop_remainder=drop_remainder,
                            queue_size=2) as p:
            for batch in p:
                rows.append(tuple(np.array(a) for a in batch))
    except Exception as e:  # noqa: BLE001 - the property inspects it
        return rows, e
    return rows, None


def _expected_batches(samples, specs, batch_size, drop_remainder):
    n = len(samples)
    stop = n - n % batch_size if drop_remainder else n
    out = []
    for b in range(0, stop, batch_size):
        chunk = samples[b:b + batch_size]
        with np.errstate(over="ignore", invalid="ignore"):  # numpy's same_kind casts may overflow
                out.append(tuple(np.stack([np.asarray(s[f]).astype(specs[f]) for s in chunk])
                             for f in range(len(specs))))
    return out


def _assert_batches_equal(got, want):
    assert len(got) == len(want)
    for bg, bw in zip(got, want):
        assert len(bg) == len(bw)
        for g, w in zip(bg, bw):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert g.tobytes() == w.tobytes()  # bitwise: NaNs and -0.0 included


@settings(max_examples=100, **SETTINGS)
@given(uniform_samples(), st.sampled_from([1, 2]), st.booleans())
def test_iterable_batches_are_stacked_samples(case, workers, drop_remainder):
    samples, bs = case
    first = samples[0]
    rows, err = _collect(samples, bs, workers, drop_remainder)
    if drop_remainder and bs > len(samples):  # refused up front: no epoch would have a batch
        assert isinstance(err, ValueError) and "larger than" in str(err), repr(err)
        return
    if any(0 in np.shape(f) for f in first):
        assert isinstance(err, ValueError), err
        assert "empty" in str(err)
        return
    assert err is None, repr(err)
    specs = [_native(np.asarray(f).dtype) for f in first]
    _assert_batches_equal(rows, _expected_batches(samples, specs, bs, drop_remainder))


@st.composite
def mixed_samples(draw):
    """Samples of one field whose dtype (and Python scalar type) varies."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    n = draw(st.integers(2, 7))
    out = []
    for _ in range(n):
        if shape == (1,) and draw(st.booleans()):
            out.append(draw(_python_scalars()))
        else:
            out.append(draw(_array_field(shape)))
    return out, draw(st.integers(1, 3))


@settings(max_examples=150, **SETTINGS)
@given(mixed_samples(), st.sampled_from([1, 2]))
def test_mixed_dtypes_cast_like_numpy_or_fail_naming_the_sample(case, workers):
    values, bs = case
    samples = [(v,) for v in values]
    rows, err = _collect(samples, bs, workers)
    first = np.asarray(values[0])
    if first.dtype.hasobject:  # e.g. a Python int beyond int64
        assert isinstance(err, TypeError) and "sample 0" in str(err), repr(err)
        assert rows == []
        return
    spec = _native(first.dtype)

    def refused(v):
        a = np.asarray(v)
        if a.shape != first.shape:
            return "shape"
        if not np.can_cast(a.dtype, spec, "same_kind"):
            return "dtype"
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                a.astype(spec)
        except Exception:  # noqa: BLE001 - e.g. bytes b"\x80" -> str
            return "cast"
        return None

    bad = [(k, refused(v)) for k, v in enumerate(values) if refused(v)]
    if not bad:
        assert err is None, repr(err)
        _assert_batches_equal(rows, _expected_batches(samples, [spec], bs, False))
        return
    k, why = bad[0]
    assert err is not None
    if why != "cast":  # (a failing cast: see test_a_failing_cast_names_the_sample)
        assert isinstance(err, ValueError), repr(err)
        assert f"sample {k}," in str(err), str(err)
    # everything before the failing sample's batch was delivered, and correctly
    _assert_batches_equal(rows, _expected_batches(samples[:k - k % bs], [spec], bs, False))


def test_a_failing_cast_names_the_sample():
    # Was a bug: sources._convert let the exception of a cast numpy itself refuses
    # (here bytes b"\x80" into the first sample's str dtype) through as a bare
    # UnicodeDecodeError that does not say which sample it was.
    samples = [np.array(["a"]), np.array(["b"]), np.array([b"\x80"])]
    rows, err = _collect(samples, 1, 1)
    assert len(rows) == 2 and err is not None
    assert "sample 2" in str(err) or getattr(err, "index", None) == 2, repr(err)


@pytest.mark.parametrize("dtype", ["datetime64[D]", "datetime64[ms]", "timedelta64[s]", "datetime64[Y]"])
def test_datetime_units_survive_the_ring(dtype):
    # Was a bug: Ring._arrays built the batch with PyArray_New(type_num), which
    # drops the unit of datetime64/timedelta64 (the batch comes back as generic
    # 'M8'/'m8', whose values numpy cannot even print).  Fix: PyArray_NewFromDescr
    # with the block's dtype.
    values = np.array([3, 1000, -7], dtype="int64").view(dtype)
    samples = [(values[i:i + 1],) for i in range(3)]
    rows, err = _collect(samples, 3, 1)
    assert err is None, repr(err)
    _assert_batches_equal(rows, _expected_batches(samples, [np.dtype(dtype)], 3, False))


@pytest.mark.parametrize("bad", [np.array([object()], dtype=object), np.array([1, "a"], dtype=object),
                                 np.zeros(2, dtype=[("a", "i4"), ("b", "f4")])])
def test_object_and_structured_fields_are_refused_up_front(bad):
    with pytest.raises(TypeError, match=r"sample 0, field 1: dtype .* cannot be batched"):
        fastq.Pipeline([(np.zeros(2), bad)] * 4, batch_size=2).output_spec


# -- more than 32 dimensions (issue 10: a stack overflow in the bindings today) -------

_MANY_DIMS_SCRIPT = textwrap.dedent(r"""
    import sys
    import numpy as np
    import fastq
    from fastq import ops

    def attempt(make):
        try:
            with make() as p:
                n = sum(1 for _ in p)
            return "ok %d" % n
        except ValueError as e:
            return "ValueError " + str(e).replace("\n", " ")
        except Exception as e:
            return "OTHER %s %s" % (type(e).__name__, e)

    for nd in [int(a) for a in sys.argv[1:]]:
        shape = (1,) * nd
        r1 = attempt(lambda: fastq.Pipeline([np.zeros(shape, np.uint8)] * 4, batch_size=2))
        r2 = attempt(lambda: fastq.Pipeline([(np.int32(1), np.zeros(shape, np.float32))] * 4, batch_size=2))
        def with_labels():  # (numpy itself refuses a 4 x 64-dim labels array: a ValueError too)
            labels = np.zeros((4,) + shape, np.int16)
            src = fastq.sources.Arrays([np.zeros((4, 4, 3), np.uint8)] * 4, labels=labels)
            return fastq.Pipeline(src, batch_size=2, ops=[ops.CenterCrop(2)])
        r3 = attempt(with_labels)
        for what, r in (("iterable", r1), ("second field", r2), ("labels", r3)):
            print("%d|%s|%s" % (nd, what, r), flush=True)
""")


def _run_many_dims(ndims):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _MANY_DIMS_SCRIPT] + [str(n) for n in ndims],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, (
        f"the process died with rc {proc.returncode} (a negative rc is a signal: -11 = segfault) after:\n"
        f"{proc.stdout}\n{proc.stderr[:3000]}")
    out = {}
    for line in proc.stdout.splitlines():
        nd, what, result = line.split("|", 2)
        out[(int(nd), what)] = result
    return out


def test_up_to_31_sample_dimensions_work():
    out = _run_many_dims([0, 1, 8, 31])
    assert len(out) == 12
    for key, r in out.items():
        assert r == "ok 2", (key, r)


def test_more_than_32_sample_dimensions_raise_valueerror_not_crash():
    # Fails before the fix of issue 10 (the bindings fill `npy_intp dims[33]` without
    # a bound check: 33 dims silently overflow the stack array, 40 segfault).
    # A batch of 32-dim samples has 33 dimensions: either accepted or refused,
    # but never a crash.
    out = _run_many_dims([32, 33, 40, 63, 64])
    assert len(out) == 15, out
    for (nd, what), r in out.items():
        if nd == 32:
            assert r == "ok 2" or r.startswith("ValueError "), (nd, what, r)
        else:
            assert r.startswith("ValueError "), (nd, what, r)
            assert "dim" in r, (nd, what, r)


# -- byte mutations fed to the decoder ---------------------------------------------

def _pattern(h, w):
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 7 + y) % 256, (y * 5 + 40) % 256, (x * y) % 253], -1).astype(np.uint8)


@pytest.fixture(scope="module")
def encoded():
    import cv2
    img = _pattern(24, 40)
    out = {}
    for name, ext, params in [("jpeg", ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 85]),
                              ("progressive", ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 85, cv2.IMWRITE_JPEG_PROGRESSIVE, 1]),
                              ("png", ".png", []), ("webp", ".webp", [cv2.IMWRITE_WEBP_QUALITY, 80]),
                              ("bmp", ".bmp", [])]:
        ok, e = cv2.imencode(ext, img, params)
        assert ok, name
        out[name] = e.tobytes()
    return out


MUTATION = st.tuples(
    st.sampled_from(["flip", "set", "set32", "truncate", "insert", "delete"]),
    st.one_of(st.integers(0, 63), st.integers(0, 1 << 16)),   # position (header-biased)
    st.integers(0, 255),
    st.sampled_from([0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF]),
)


def _mutate(data, muts):
    b = bytearray(data)
    for kind, pos, byte, word in muts:
        if not b:
            break
        p = pos % len(b)
        if kind == "flip":
            b[p] ^= 1 << (byte % 8)
        elif kind == "set":
            b[p] = byte
        elif kind == "set32":
            b[p:p + 4] = word.to_bytes(4, "big")
        elif kind == "truncate":
            del b[p:]
        elif kind == "insert":
            b[p:p] = bytes([byte]) * (1 + byte % 7)
        else:
            del b[p:p + 1 + byte % 16]
    return bytes(b)


CHAIN = [ops.RandomResizedCrop(16, scale=(0.3, 1.0)), ops.HorizontalFlip()]


def _alone(spec, buf, index):
    """The buffer processed on its own: ('ok', bytes) or ('error', class name)."""
    try:
        out, _ = spec.process_encoded(buf, seed=3, epoch=0, index=index)
    except errors.FastqError as e:
        assert str(e), "an error needs a message"
        return "error", type(e).__name__
    return "ok", out.tobytes()


@settings(max_examples=200, **SETTINGS)
@given(st.lists(st.tuples(st.sampled_from(["jpeg", "progressive", "png", "webp", "bmp"]),
                          st.lists(MUTATION, min_size=1, max_size=4)), min_size=1, max_size=6))
def test_mutated_images_decode_or_fail_cleanly_and_the_same_for_1_and_2_workers(encoded, cases):
    bufs = [_mutate(encoded[fmt], muts) for fmt, muts in cases]
    spec = _image.ImageSpec(ops.compile_ops(CHAIN, dtype="uint8"))
    alone = [_alone(spec, b, i) for i, b in enumerate(bufs)]
    results = []
    for workers in (1, 2):
        rows, err = {}, None
        src = fastq.sources.Bytes(bufs)
        with fastq.Pipeline(src, batch_size=1, workers=workers, ops=CHAIN, dtype="uint8", seed=3,
                            on_error="skip", return_index=True, queue_size=2) as p:
            try:
                for b in p:
                    rows[int(b[1][0])] = b[0][0].tobytes()
            except errors.FastqError as e:
                err = type(e).__name__
            skipped = p.stats()["skipped"]
        results.append((rows, err, skipped))
    good = {i: r[1] for i, r in enumerate(alone) if r[0] == "ok"}
    (rows, err, skipped), (rows2, err2, skipped2) = results
    assert (rows, err) == (rows2, err2)
    # on_error="skip" replaces a failed sample by another sample of the source (up to
    # max_attempts draws), so rows are keyed by the index actually delivered; each
    # must be that buffer's own result.
    assert set(rows) <= set(good)
    for i, data in rows.items():
        assert data == good[i], i
    if not good:
        assert err is not None  # nothing can replace a failed sample
    if err is None:
        # every failure was counted (with an error, workers may have run ahead)
        assert skipped == skipped2 == len(alone) - len(good)
        assert set(rows) == {i for i in good} | set(rows)


@pytest.mark.parametrize("w,h", [(0xFFFFFFFF, 0xFFFFFFFF), (0x86010000, 0xFFDB0043),
                                 (0x80000000, 0x80000000)])
def test_png_header_dims_beyond_int64_are_too_large(w, h):
    # Found by csrc/tests/fuzz_decode.cpp.  It failed for the first two: cv_decode
    # (fq_image_decode.cpp) multiplies the two 32-bit IHDR dimensions in int64_t,
    # which overflows (undefined behaviour; in practice it wraps negative and slips
    # past the max_pixels guard, so the error is a DecodeError from OpenCV instead).
    import struct
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + struct.pack(">II", w, h) + b"\x08\x02\x00\x00\x00" + bytes(4)
    spec = _image.ImageSpec(ops.compile_ops([ops.CenterCrop(8)], dtype="uint8"))
    with pytest.raises(errors.ImageTooLargeError, match="max_pixels"):
        spec.process_encoded(data)


def test_every_format_decodes_unmutated(encoded):
    # the mutation test above is only meaningful if the base images decode
    spec = _image.ImageSpec(ops.compile_ops(CHAIN, dtype="uint8"))
    for name, data in encoded.items():
        assert _alone(spec, data, 0)[0] == "ok", name
