"""Custom ops (docs/custom_ops.md): CustomOp, a C function of a user library built here
with gcc against the installed header (fastq.get_include()), and PyFunc, a Python
callable.  Outputs are checked against numpy given the op's stream key from the explain
record (the stream is SplitMix64, replayed here in numpy), determinism for 1 vs 2
workers, the error paths (a failing sample, on_error="skip", missing library / symbol /
ABI), buffer ownership (the caller's array is never written) and the GIL contract."""
import ctypes
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import fastq
from fastq._native import _image
from fastq import errors
from fastq import ops as O

GAMMA = np.uint64(0x9E3779B97F4A7C15)

C_SOURCE = r"""
#include "fastq_custom_op.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

FASTQ_CUSTOM_OP_API int frees = 0;   /* how many times scale_free ran */
FASTQ_CUSTOM_OP_API int calls = 0;   /* not atomic: only read when one thread ran */

/* invert: 255 - x */
FASTQ_CUSTOM_OP_DECLARE_ABI(invert)
FASTQ_CUSTOM_OP_API int invert(void *state, uint8_t *px, int h, int w, int c, size_t rs, const double *params,
                               int np, fq_custom_rng *rng, char *msg, size_t ml)
{
    (void)state; (void)params; (void)np; (void)rng; (void)msg; (void)ml;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * c; x++)
            px[y * rs + x] = (uint8_t)(255 - px[y * rs + x]);
    return 0;
}

/* noise: one uniform -> offset = (int)(u * params[1]); then per value
 * clip(v + offset + (u64 % (2 amp + 1)) - amp), amp = params[0] */
FASTQ_CUSTOM_OP_DECLARE_ABI(noise)
FASTQ_CUSTOM_OP_API int noise(void *state, uint8_t *px, int h, int w, int c, size_t rs, const double *params,
                              int np, fq_custom_rng *rng, char *msg, size_t ml)
{
    (void)state;
    if (np != 2) { snprintf(msg, ml, "noise needs 2 params, got %d", np); return 2; }
    if (rng->abi_version != FASTQ_CUSTOM_OP_ABI_VERSION) { snprintf(msg, ml, "rng abi"); return 3; }
    int amp = (int)params[0];
    int off = (int)(fq_custom_rng_uniform(rng) * params[1]);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * c; x++) {
            int d = (int)(fq_custom_rng_u64(rng) % (uint64_t)(2 * amp + 1)) - amp;
            int v = px[y * rs + x] + off + d;
            px[y * rs + x] = (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
        }
    return 0;
}

/* failing: fails when the first value is 7 */
FASTQ_CUSTOM_OP_DECLARE_ABI(failing)
FASTQ_CUSTOM_OP_API int failing(void *state, uint8_t *px, int h, int w, int c, size_t rs, const double *params,
                                int np, fq_custom_rng *rng, char *msg, size_t ml)
{
    (void)state; (void)h; (void)w; (void)c; (void)rs; (void)params; (void)np; (void)rng;
    if (px[0] == 7) { snprintf(msg, ml, "first pixel is %d, I refuse", px[0]); return 5; }
    return 0;
}

/* scale: a LUT built by init from params[0] (the shared read-only state) */
FASTQ_CUSTOM_OP_DECLARE_ABI(scale)
FASTQ_CUSTOM_OP_API int scale_init(const double *params, int np, void **state, char *msg, size_t ml)
{
    if (np < 1) { snprintf(msg, ml, "scale needs a factor"); return 7; }
    uint8_t *lut = malloc(256);
    if (!lut) return 1;
    for (int v = 0; v < 256; v++) { double s = v * params[0]; lut[v] = (uint8_t)(s > 255 ? 255 : s); }
    *state = lut;
    return 0;
}
FASTQ_CUSTOM_OP_API void scale_free(void *state) { free(state); frees++; }
FASTQ_CUSTOM_OP_API int scale(void *state, uint8_t *px, int h, int w, int c, size_t rs, const double *params,
                              int np, fq_custom_rng *rng, char *msg, size_t ml)
{
    (void)params; (void)np; (void)rng; (void)msg; (void)ml;
    const uint8_t *lut = state;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * c; x++)
            px[y * rs + x] = lut[px[y * rs + x]];
    calls++;
    return 0;
}

/* slow: sleeps params[0] ms (for the GIL test) */
FASTQ_CUSTOM_OP_DECLARE_ABI(slow)
FASTQ_CUSTOM_OP_API int slow(void *state, uint8_t *px, int h, int w, int c, size_t rs, const double *params,
                             int np, fq_custom_rng *rng, char *msg, size_t ml)
{
    (void)state; (void)px; (void)h; (void)w; (void)c; (void)rs; (void)np; (void)rng; (void)msg; (void)ml;
    struct timespec ts = {0, (long)(params[0] * 1e6)};
    nanosleep(&ts, NULL);
    return 0;
}

/* noabi: no noabi_abi_version;  future: built for another ABI version */
FASTQ_CUSTOM_OP_API int noabi(void *s, uint8_t *p, int h, int w, int c, size_t rs, const double *a, int n,
                              fq_custom_rng *r, char *m, size_t ml)
{ (void)s; (void)p; (void)h; (void)w; (void)c; (void)rs; (void)a; (void)n; (void)r; (void)m; (void)ml; return 0; }
FASTQ_CUSTOM_OP_API unsigned future_abi_version(void) { return FASTQ_CUSTOM_OP_ABI_VERSION + 1; }
FASTQ_CUSTOM_OP_API int future(void *s, uint8_t *p, int h, int w, int c, size_t rs, const double *a, int n,
                               fq_custom_rng *r, char *m, size_t ml)
{ (void)s; (void)p; (void)h; (void)w; (void)c; (void)rs; (void)a; (void)n; (void)r; (void)m; (void)ml; return 0; }
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (gcc / cc) to build the test library")
    d = tmp_path_factory.mktemp("customop")
    src = d / "myops.c"
    src.write_text(C_SOURCE)
    out = d / "libmyops.so"
    r = subprocess.run([cc, "-O2", "-std=c99", "-D_POSIX_C_SOURCE=199309L", "-Wall", "-Wextra", "-Werror",
                        "-shared", "-fPIC", "-I", fastq.get_include(), str(src), "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return str(out)


def _imgs(n=6, h=12, w=10, c=3, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (h, w, c), dtype=np.uint8) for _ in range(n)]


def _spec(chain, size=(12, 10), channels=3):
    return _image.ImageSpec(O.compile_ops(chain, dtype="uint8", input_size=size, channels=channels))


def _stream(key, n):
    """The first n u64 of the op's stream (fq_rng: SplitMix64 from state = key)."""
    with np.errstate(over="ignore"):
        z = np.uint64(key) + GAMMA * np.arange(1, n + 1, dtype=np.uint64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _noise_ref(img, key, amp, spread):
    draws = _stream(key, 1 + img.size)
    off = int(float(draws[0] >> np.uint64(11)) * 2.0 ** -53 * spread)
    d = (draws[1:] % np.uint64(2 * amp + 1)).astype(np.int64) - amp
    return np.clip(img.astype(np.int64) + off + d.reshape(img.shape), 0, 255).astype(np.uint8)


def _custom_records(ex):
    return [o for o in ex["ops"] if o["op"] in ("CustomOp", "PyFunc")]


def _run(src_imgs, chain, workers, **kw):
    kw = dict(dict(batch_size=2, dtype="uint8", seed=11, return_index=True), **kw)
    with fastq.Pipeline(fastq.sources.Arrays(src_imgs), workers=workers, ops=chain, **kw) as p:
        out = [tuple(np.array(a) for a in b) for b in p]
        st = p.stats()
    return np.concatenate([b[0] for b in out]), np.concatenate([b[-1] for b in out]), st


# ---- CustomOp ---------------------------------------------------------------------------

def test_header_is_found_and_declares_the_abi():
    inc = fastq.get_include()
    text = open(os.path.join(inc, "fastq_custom_op.h")).read()
    assert "#define FASTQ_CUSTOM_OP_ABI_VERSION 1u" in text
    assert _image.CUSTOM_OP_ABI_VERSION == 1


def test_invert_matches_numpy_and_leaves_the_callers_array_alone(lib):
    img = _imgs(1)[0]
    before = img.copy()
    out, ex = _spec([O.CustomOp(lib, "invert")]).process_array(img)
    np.testing.assert_array_equal(out, 255 - img)
    np.testing.assert_array_equal(img, before)  # the op ran on a copy, not on the caller's pixels
    (rec,) = _custom_records(ex)
    assert rec["applied"] and isinstance(rec["rng_key"], int)


def test_strided_view_flips_and_gray(lib):
    img = _imgs(1, 30, 20)[0]
    # Resize -> buffer a; CenterCrop -> a view of it with row_stride 20 * 3 > 8 * 3: in place
    chain = [O.Resize((16, 20), interpolation="nearest"), O.CenterCrop((10, 8)), O.CustomOp(lib, "invert")]
    ref, _ = _spec(chain[:2], size=(30, 20)).process_array(img)
    out, _ = _spec(chain, size=(30, 20)).process_array(img)
    np.testing.assert_array_equal(out, 255 - ref)
    # a deferred flip is applied before the op sees the image
    noise = O.CustomOp(lib, "noise", params=[3, 5])
    out, ex = _spec([O.HorizontalFlip(1.0), noise]).process_array(img[:12, :10])
    np.testing.assert_array_equal(out, _noise_ref(img[:12, :10][:, ::-1], _custom_records(ex)[0]["rng_key"], 3, 5))
    g = img[:12, :10, :1].copy()
    out, ex = _spec([noise], channels=1).process_array(g)
    np.testing.assert_array_equal(out, _noise_ref(g, _custom_records(ex)[0]["rng_key"], 3, 5))


def test_noise_draws_from_the_samples_stream(lib):
    imgs = _imgs(4)
    spec = _spec([O.Invert(0.5), O.CustomOp(lib, "noise", params=[4, 9.5]), O.Brightness((0.5, 1.5))])
    keys = set()
    for i, img in enumerate(imgs):
        out, ex = spec.process_array(img, seed=3, epoch=1, index=i)
        inv, rec, br = ex["ops"][1:]
        x = 255 - img if inv["applied"] else img
        y = _noise_ref(x, rec["rng_key"], 4, 9.5)
        # the ops around it still replay: Brightness through a spec of its own at the drawn factor
        want, _ = _spec([O.Brightness(br["magnitude"])]).process_array(y)
        np.testing.assert_array_equal(out, want)
        again, ex2 = spec.process_array(img, seed=3, epoch=1, index=i)
        np.testing.assert_array_equal(out, again)
        keys.add(rec["rng_key"])
    assert len(keys) == 4
    _, ex = spec.process_array(imgs[0], seed=3, epoch=2, index=0)
    assert ex["ops"][2]["rng_key"] not in keys  # another epoch, another stream


def test_p_and_one_vs_two_workers(lib):
    imgs = _imgs(10)
    chain = [O.RandomCrop(8), O.CustomOp(lib, "noise", params=[6, 3], p=0.5), O.HorizontalFlip(),
             O.CustomOp(lib, "invert", p=0.5)]
    a, ia, _ = _run(imgs, chain, 1)
    b, ib, _ = _run(imgs, chain, 2)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(a, b)
    spec = _spec(chain)
    applied = [_custom_records(spec.process_array(im, index=i)[1]) for i, im in enumerate(imgs)]
    flags = [r["applied"] for recs in applied for r in recs]
    assert any(flags) and not all(flags)
    assert all(("rng_key" in r) == r["applied"] for recs in applied for r in recs)


def test_state_from_init_is_freed_with_the_spec(lib):
    handle = ctypes.CDLL(lib)  # the same loaded copy (dlopen reference counting)
    frees = ctypes.c_int.in_dll(handle, "frees")
    calls = ctypes.c_int.in_dll(handle, "calls")
    start_frees, start_calls = frees.value, calls.value
    img = _imgs(1)[0]
    spec = _spec([O.CustomOp(lib, "scale", params=[0.5])])
    out, _ = spec.process_array(img)
    np.testing.assert_array_equal(out, (img * 0.5).astype(np.uint8))
    assert calls.value == start_calls + 1 and frees.value == start_frees
    del spec
    assert frees.value == start_frees + 1
    with pytest.raises(errors.InvalidArgumentError, match=r"scale_init in library '.*libmyops.so' failed "
                                                          r"\(return 7\): scale needs a factor"):
        _spec([O.CustomOp(lib, "scale")])


def test_failing_sample_names_the_sample_and_skip_counts_it(lib):
    imgs = _imgs(8)
    for im in imgs:
        im[0, 0, 0] = 8
    imgs[5][0, 0, 0] = 7
    chain = [O.CustomOp(lib, "failing")]
    with pytest.raises(errors.InvalidArgumentError) as ei:
        _run(imgs, chain, 2)
    msg = str(ei.value)
    assert "sample 5" in msg and "failing (" in msg and "(return 5): first pixel is 7, I refuse" in msg, msg
    out, idx, st = _run(imgs, chain, 2, on_error="skip")
    assert len(idx) == 8 and 5 not in set(idx.tolist())
    assert st["skipped"] == 1 and st["skipped_by_reason"] == {"FQ_E_INVALID": 1}
    assert "first pixel is 7" in st["last_skip_message"]["FQ_E_INVALID"]
    # the same error through the encoded paths: OpenCV (PNG) and the JPEG decoder
    cv2 = pytest.importorskip("cv2", reason="cv2 encodes the test images")
    spec = _spec([O.CenterCrop(8), O.CustomOp(lib, "failing")], size=None)
    for ext in (".png", ".jpg"):
        ok, enc = cv2.imencode(ext, np.full((16, 16, 3), 7, np.uint8))  # flat: the JPEG decodes to 7 exactly
        assert ok
        with pytest.raises(errors.InvalidArgumentError, match="I refuse"):
            spec.process_encoded(enc.tobytes())
        ok, enc = cv2.imencode(ext, np.full((16, 16, 3), 9, np.uint8))
        out, _ = spec.process_encoded(enc.tobytes())
        assert out.shape == (8, 8, 3)


def test_load_errors_name_library_symbol_and_abi(lib, tmp_path):
    def spec_of(op):
        return _spec([op])

    missing = str(tmp_path / "nope.so")
    with pytest.raises(errors.InvalidArgumentError, match=f"cannot load library '{missing}'"):
        spec_of(O.CustomOp(missing, "invert"))
    with pytest.raises(errors.InvalidArgumentError, match=r"library '.*libmyops.so' has no symbol 'absent'"):
        spec_of(O.CustomOp(lib, "absent"))
    with pytest.raises(errors.InvalidArgumentError, match=r"no symbol 'noabi_abi_version' \(write "
                                                          r"FASTQ_CUSTOM_OP_DECLARE_ABI\(noabi\)"):
        spec_of(O.CustomOp(lib, "noabi"))
    with pytest.raises(errors.InvalidArgumentError, match=r"'future' in library '.*' was built for custom-op ABI "
                                                          r"version 2, this fastq has version 1"):
        spec_of(O.CustomOp(lib, "future"))
    with pytest.raises(errors.InvalidArgumentError, match="has no symbol 'absent'"):
        O.CustomOp(lib, "absent").check()
    O.CustomOp(lib, "invert").check()
    with pytest.raises(errors.InvalidArgumentError, match="cannot load library"):
        fastq.Pipeline(fastq.sources.Arrays(_imgs(2)), batch_size=2, ops=[O.CustomOp(missing, "x")], dtype="uint8")
    # packed ops alone carry no function
    packed = O.compile_ops([O.CustomOp(lib, "invert")], dtype="uint8", input_size=(12, 10)).packed_ops
    with pytest.raises(errors.InvalidArgumentError, match=r"op 1 \(CustomOp\): no function bound to slot 0"):
        _image.ImageSpec(packed, dtype="uint8")


def test_bad_arguments():
    for make, match in [(lambda: O.CustomOp("", "x"), "library must be a non-empty path"),
                        (lambda: O.CustomOp("/l.so", "not an identifier"), "symbol must be a C identifier"),
                        (lambda: O.CustomOp("/l.so", "x", params=["a"]), "params must be a sequence of numbers"),
                        (lambda: O.CustomOp("/l.so", "x", params=[float("inf")]), "params must be finite"),
                        (lambda: O.CustomOp("/l.so", "x", p=2), "p must be a probability"),
                        (lambda: O.PyFunc(3), "fn must be callable"),
                        (lambda: O.PyFunc(print, p=-1), "p must be a probability")]:
        with pytest.raises(ValueError, match=match):
            make()
    assert O.CustomOp("/l.so", "x", [1]) == O.CustomOp("/l.so", "x", [1.0])
    assert O.CustomOp("/l.so", "x", [1]) != O.CustomOp("/l.so", "y", [1])
    assert O.PyFunc(print) != O.PyFunc(len)


def test_native_op_runs_without_the_gil(lib):
    # a 300 ms native op on another thread: the main thread's Python loop keeps running
    spec = _spec([O.CustomOp(lib, "slow", params=[300])])
    done = []
    t = threading.Thread(target=lambda: done.append(spec.process_array(_imgs(1)[0])))
    count, t0 = 0, time.perf_counter()
    t.start()
    while t.is_alive():
        count += 1
    elapsed = time.perf_counter() - t0
    t.join()
    assert done and elapsed >= 0.25
    # under a held GIL the loop would stall for the whole call; it ran throughout
    assert count > 10000, count


# ---- PyFunc ---------------------------------------------------------------------------

def test_pyfunc_in_place_and_returned_forms_match_numpy():
    imgs = _imgs(3)

    def halve(im, rng):
        im //= 2

    def swap(im, rng):
        return np.ascontiguousarray(im[:, :, ::-1])

    for i, img in enumerate(imgs):
        out, ex = _spec([O.PyFunc(halve), O.HorizontalFlip(1.0), O.PyFunc(swap)]).process_array(img, index=i)
        np.testing.assert_array_equal(out, (img // 2)[:, ::-1, ::-1])
        assert [r["op"] for r in _custom_records(ex)] == ["PyFunc", "PyFunc"]
    # a returned view of the image itself (overlapping memory) is copied back correctly
    for fn in (lambda im, rng: im[::-1], lambda im, rng: im[:, ::-1], lambda im, rng: im):
        out, _ = _spec([O.Resize((12, 10)), O.PyFunc(fn)]).process_array(imgs[0])
        np.testing.assert_array_equal(out, fn(imgs[0], None))


def test_pyfunc_beside_and_inside_a_composition():
    """A composition packs into several rows (its record, then its children's): a PyFunc next
    to one, or inside one, binds to its own row (once refused: "the op objects do not match
    the packed ops")."""
    imgs = _imgs(8)

    def inv(im, rng):
        im[:] = 255 - im

    flip = O.RandomApply([O.HorizontalFlip(1.0), O.VerticalFlip(1.0)], p=0.5)
    got, _, _ = _run(imgs, [flip, O.PyFunc(inv)], 1)
    ref, _, _ = _run(imgs, [flip, O.Invert()], 1)
    np.testing.assert_array_equal(got, ref)
    got, _, _ = _run(imgs, [O.RandomChoice([O.PyFunc(inv), O.HorizontalFlip(1.0)])], 2)
    ref, _, _ = _run(imgs, [O.RandomChoice([O.Invert(), O.HorizontalFlip(1.0)])], 1)
    np.testing.assert_array_equal(got, ref)
    assert not (got == np.stack(imgs)).all() and not (got == 255 - np.stack(imgs)).all()  # both ran


def test_pyfunc_rng_is_the_samples_and_deterministic():
    imgs = _imgs(10)

    def noisy(im, rng):
        im[:] = np.clip(im + rng.integers(-20, 21, im.shape), 0, 255)

    spec = _spec([O.PyFunc(noisy)])
    for i, img in enumerate(imgs[:3]):
        out, ex = spec.process_array(img, seed=2, index=i)
        key = _custom_records(ex)[0]["rng_key"]
        gen = np.random.default_rng(int(_stream(key, 1)[0]))
        want = np.clip(img + gen.integers(-20, 21, img.shape), 0, 255)
        np.testing.assert_array_equal(out, want)
    chain = [O.RandomCrop(8), O.PyFunc(noisy), O.HorizontalFlip()]
    a, ia, _ = _run(imgs, chain, 1)
    b, ib, _ = _run(imgs, chain, 2)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(a, b)


def test_pyfunc_exception_fails_the_sample_with_its_traceback():
    imgs = _imgs(6)

    def picky(im, rng):
        if im[0, 0, 0] == 7:
            raise ValueError("seven is not allowed")

    for im in imgs:
        im[0, 0, 0] = 1
    imgs[3][0, 0, 0] = 7
    with pytest.raises(errors.InvalidArgumentError) as ei:
        _run(imgs, [O.PyFunc(picky)], 2)
    msg = str(ei.value)
    assert "sample 3" in msg and "PyFunc(" in msg and "picky" in msg, msg
    assert "ValueError: seven is not allowed" in msg and "Traceback" in msg and "in picky" in msg, msg
    _, idx, st = _run(imgs, [O.PyFunc(picky)], 2, on_error="skip")
    assert 3 not in set(idx.tolist()) and st["skipped"] == 1
    with pytest.raises(errors.InvalidArgumentError, match=r"must return None \(in place\) or a uint8 array of shape "
                                                          r"\(12, 10, 3\), got ndarray float64"):
        _spec([O.PyFunc(lambda im, rng: im.astype(float))]).process_array(imgs[0])


def test_pyfunc_runs_on_the_workers_with_the_gil():
    imgs = _imgs(12)
    seen = []
    lock = threading.Lock()
    main = threading.get_ident()

    def record(im, rng):
        # Python code runs here, so the calling thread holds the GIL
        with lock:
            seen.append(threading.get_ident())

    _run(imgs, [O.PyFunc(record)], 2)
    assert len(seen) == 12 and main not in seen
    # the reference the spec held is dropped with it
    fn_refs = sys.getrefcount(record)
    spec = _spec([O.PyFunc(record)])
    del spec
    assert sys.getrefcount(record) == fn_refs
