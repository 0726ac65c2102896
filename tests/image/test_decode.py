"""Decoding: libjpeg-turbo full / ROI / DCT-scaled decode against pip cv2's decoder,
other formats and channel conversions, and every broken file of make_bad_files.

Tolerances (docs/ops.md): full and ROI JPEG decode are bit-exact with cv2.imdecode
(both libjpeg-turbo, ISLOW IDCT, fancy upsampling); DCT-scaled decode followed by the
resample is compared with full decode + cv2.resize INTER_AREA: mean |diff| <= 5 levels
per sample and <= 2 over the set for 96 px outputs, <= 3 / <= 1 for 224 px outputs;
CMYK within 1 level of cv2.
"""
import base64
import io
import os
import struct

import cv2
import numpy as np
import pytest

from helpers import image_ref as ref  # noqa: I100  (puts the repo root on sys.path)
from fastq import errors as E
from fastq import ops as O
from fastq.bench.testdata import BAD_FILE_ERRORS, make_bad_files, make_jpeg_dataset

from fastq._native import _image  # noqa: E402
ImageSpec = _image.ImageSpec


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    d = tmp_path_factory.mktemp("jpegs")
    return [open(p, "rb").read() for p in make_jpeg_dataset(str(d), 16, seed=1)]


@pytest.fixture(scope="module")
def big_jpegs(tmp_path_factory):
    d = tmp_path_factory.mktemp("big")
    return [open(p, "rb").read() for p in make_jpeg_dataset(str(d), 6, seed=2, min_side=700, max_side=1200)]


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    return make_bad_files(str(tmp_path_factory.mktemp("bad")))


def read(p):
    with open(p, "rb") as f:
        return f.read()


def spec_for(chain, **kw):
    return ImageSpec(O.compile_ops(chain, **kw))


def test_dataset_is_deterministic_and_in_range(tmp_path, jpegs):
    a = make_jpeg_dataset(str(tmp_path / "a"), 4, seed=1)
    assert [read(p) for p in a] == jpegs[:4]
    for b in jpegs:
        img = ref.cv2_decode_rgb(b)
        assert 300 <= min(img.shape[:2]) and max(img.shape[:2]) <= 800


def test_full_decode_is_bit_exact(jpegs):
    for b in jpegs:
        want = ref.cv2_decode_rgb(b)
        h, w = want.shape[:2]
        out, ex = spec_for([O.CenterCrop((h, w))], dtype="uint8").process_encoded(b)
        assert ex["format"] == "jpeg" and ex["src_shape"] == (h, w) and not ex["roi_used"]
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("first", ["rrc", "center", "random"])
def test_roi_decode_is_bit_exact(jpegs, first):
    op = {"rrc": O.RandomResizedCrop((64, 56)), "center": O.CenterCrop((100, 150)),
          "random": O.RandomCrop((120, 90))}[first]
    chain = [op, O.HorizontalFlip()]
    spec = spec_for(chain, dtype="uint8", dct_scaling=False)
    n_roi = 0
    for k, b in enumerate(jpegs):
        full = ref.cv2_decode_rgb(b)
        for i in range(4):
            out, ex = spec.process_encoded(b, 9, 0, 4 * k + i)
            n_roi += ex["roi_used"]
            assert ex["decode_scale"] == (8, 8)
            np.testing.assert_array_equal(out, ref.replay(full, ex, chain), err_msg=str(ex))
    assert n_roi > 0


def test_roi_decode_progressive_and_gray(bad):
    for name in ("progressive_jpeg", "gray_jpeg"):
        b = read(bad[name])
        full = ref.cv2_decode_rgb(b)
        chain = [O.RandomResizedCrop(40)]
        spec = spec_for(chain, dtype="uint8", dct_scaling=False)
        for i in range(8):
            out, ex = spec.process_encoded(b, 0, 0, i)
            np.testing.assert_array_equal(out, ref.replay(full, ex, chain))


@pytest.mark.parametrize("size, per_sample, average", [(96, 5.0, 2.0), (224, 3.0, 1.0)])
def test_dct_scaled_decode_tolerance(jpegs, big_jpegs, size, per_sample, average):
    """DCT-scaled decode (1/8, 1/4, 1/2) + sub-pixel exact bilinear resample vs full
    decode + cv2.resize.  The scaled path is effectively antialiased, so it is compared
    with INTER_AREA (mean |diff| per sample <= per_sample, over the set <= average),
    and with plain INTER_LINEAR (which aliases when shrinking a lot) loosely."""
    import cv2
    chain = [O.RandomResizedCrop(size)]
    spec = spec_for(chain, dtype="uint8", dct_scaling=True)
    d_area, scales = [], set()
    for k, b in enumerate(jpegs + big_jpegs):
        full = ref.cv2_decode_rgb(b)
        for i in range(6):
            out, ex = spec.process_encoded(b, 4, 0, 6 * k + i)
            num, den = ex["decode_scale"]
            x, y, w, h = ex["crop_src"]
            if num == 8:
                np.testing.assert_array_equal(out, ref.replay(full, ex, chain))
                continue
            scales.add(num)
            assert num in (1, 2, 4) and den == 8
            assert w * num >= size * 8 and h * num >= size * 8  # scaled crop still >= output
            crop = full[y:y + h, x:x + w]
            area = cv2.resize(crop, (size, size), interpolation=cv2.INTER_AREA)
            lin = ref.replay(full, ex, chain)
            da = np.abs(out.astype(int) - area.astype(int)).mean()
            dl = np.abs(out.astype(int) - lin.astype(int)).mean()
            dla = np.abs(lin.astype(int) - area.astype(int)).mean()
            assert da <= per_sample, (da, ex)
            assert dl <= dla + per_sample, (dl, dla, ex)
            d_area.append(da)
    assert len(d_area) >= 10 and 4 in scales
    assert np.mean(d_area) <= average, np.mean(d_area)


def test_dct_scaled_resize_first(big_jpegs):
    chain = [O.Resize((160, 200)), O.HorizontalFlip()]
    spec = spec_for(chain, dtype="uint8")
    for b in big_jpegs:
        out, ex = spec.process_encoded(b, 0, 0, 0)
        want = ref.replay(ref.cv2_decode_rgb(b), ex, chain)
        assert ex["decode_scale"][0] in (1, 2, 4)
        assert np.abs(out.astype(int) - want.astype(int)).mean() <= 5.0


def test_reference_task_float_output(jpegs):
    chain = [O.RandomResizedCrop(224), O.HorizontalFlip(), O.Normalize()]
    spec = spec_for(chain, dct_scaling=False)
    for k, b in enumerate(jpegs[:4]):
        out, ex = spec.process_encoded(b, 0, 0, k)
        want = ref.finish(ref.replay(ref.cv2_decode_rgb(b), ex, chain), chain)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
        assert out.dtype == np.float32 and out.shape == (224, 224, 3)


def test_gray_output_channel(jpegs, bad):
    # channels=1: JPEGs decode straight to luma (libjpeg's Y), others via RGB2GRAY
    spec = spec_for([O.CenterCrop(64)], dtype="uint8", channels=1)
    for b in jpegs[:3]:
        out, _ = spec.process_encoded(b)
        g = ref.cv2_decode_rgb(b, gray=True)
        H, W = g.shape
        want = g[round((H - 64) / 2):][:64, round((W - 64) / 2):][:, :64]
        assert out.shape == (64, 64, 1)
        assert np.abs(out[:, :, 0].astype(int) - want).max() <= 1
    out, ex = spec.process_encoded(read(bad["png"]))
    assert out.shape == (64, 64, 1) and ex["format"] == "png"


def _center(img, s=64):
    H, W = img.shape[:2]
    y, x = int(round((H - s) / 2)), int(round((W - s) / 2))
    return img[y:y + s, x:x + s]


def test_other_formats_and_conversions(bad):
    import cv2
    spec = spec_for([O.CenterCrop(64)], dtype="uint8")
    raw = lambda n: cv2.imdecode(np.frombuffer(read(bad[n]), np.uint8), cv2.IMREAD_UNCHANGED)  # noqa: E731
    out, ex = spec.process_encoded(read(bad["png"]))
    np.testing.assert_array_equal(out, _center(cv2.cvtColor(raw("png"), cv2.COLOR_BGR2RGB)))
    # 16-bit: high byte
    out, ex = spec.process_encoded(read(bad["png16"]))
    assert ex["src_bits"] == 16
    np.testing.assert_array_equal(out, _center(cv2.cvtColor((raw("png16") >> 8).astype(np.uint8), cv2.COLOR_BGR2RGB)))
    # RGBA: alpha dropped
    out, ex = spec.process_encoded(read(bad["rgba_png"]))
    assert ex["src_channels"] == 4
    np.testing.assert_array_equal(out, _center(cv2.cvtColor(raw("rgba_png"), cv2.COLOR_BGRA2RGB)))
    # gray JPEG: three equal channels
    out, ex = spec.process_encoded(read(bad["gray_jpeg"]))
    assert ex["src_channels"] == 1 and (out[:, :, 0] == out[:, :, 2]).all()
    np.testing.assert_array_equal(out[:, :, 0], _center(raw("gray_jpeg")))
    if "gray_alpha_png" in bad:
        out, ex = spec.process_encoded(read(bad["gray_alpha_png"]))
        from PIL import Image
        g = np.asarray(Image.open(bad["gray_alpha_png"]).convert("LA"))[:, :, 0]
        np.testing.assert_array_equal(out[:, :, 1], _center(g))


def test_cmyk_jpeg(bad):
    assert "cmyk_jpeg" in bad  # made with Pillow (a test requirement)
    b = read(bad["cmyk_jpeg"])
    out, ex = spec_for([O.CenterCrop(64)], dtype="uint8").process_encoded(b)
    assert ex["format"] == "jpeg" and ex["src_channels"] == 4
    want = _center(ref.cv2_decode_rgb(b))
    assert np.abs(out.astype(int) - want.astype(int)).max() <= 1


@pytest.mark.parametrize("name", sorted(BAD_FILE_ERRORS))
def test_bad_files(bad, name):
    assert name in bad, f"{name} needs Pillow (a test requirement)"
    expected = BAD_FILE_ERRORS[name]
    path = bad[name]
    if name == "missing":
        assert not os.path.exists(path)  # raised by the file reader (FQ_E_IO -> ReadError)
        return
    b = read(path)
    for chain in ([O.RandomResizedCrop(32), O.HorizontalFlip(), O.Normalize()], [O.Resize(48), O.CenterCrop(32)]):
        spec = spec_for(chain, max_pixels=50_000_000)
        for i in range(5):
            if expected is None:
                out, _ = spec.process_encoded(b, 0, 0, i)
                assert np.isfinite(out).all()
            else:
                cls = getattr(E, expected)
                with pytest.raises(cls) as info:
                    spec.process_encoded(b, 0, 0, i)
                assert str(info.value) and info.value.code.startswith("FQ_E_")
                assert isinstance(info.value, E.FastqError) and isinstance(info.value, ValueError)


def test_error_messages(bad):
    spec = spec_for([O.RandomResizedCrop(32)])
    with pytest.raises(E.ImageTooLargeError, match=r"60000x60000 exceeds max_pixels=67108864"):
        spec.process_encoded(read(bad["bomb"]))
    with pytest.raises(E.DecodeError, match="truncated|premature|corrupt"):
        spec.process_encoded(read(bad["truncated"]))
    with pytest.raises(E.DecodeError, match="unrecognized image data"):
        spec.process_encoded(read(bad["garbage"]))
    with pytest.raises(E.EmptyImageError, match="empty"):
        spec.process_encoded(b"")


def test_truncated_fails_whatever_the_crop(bad):
    # a truncated file must fail for every sample, even when the crop lies in the part
    # that is still present (the decoder checks for the end-of-image marker)
    b = read(bad["truncated"])
    spec = spec_for([O.RandomResizedCrop(32, scale=(0.01, 0.02))], dct_scaling=False)
    for i in range(50):
        with pytest.raises(E.DecodeError):
            spec.process_encoded(b, 0, 0, i)


def test_max_pixels(jpegs):
    b = jpegs[0]
    h, w = ref.cv2_decode_rgb(b).shape[:2]
    spec_for([O.CenterCrop(8)], max_pixels=h * w).process_encoded(b)
    with pytest.raises(E.ImageTooLargeError, match="max_pixels"):
        spec_for([O.CenterCrop(8)], max_pixels=h * w - 1).process_encoded(b)


def test_fuzzed_inputs_never_crash(jpegs, bad):
    rng = np.random.default_rng(0)
    spec = spec_for([O.RandomResizedCrop(24), O.HorizontalFlip(), O.Normalize()])
    seeds = [jpegs[0], read(bad["png"]), read(bad["progressive_jpeg"])]
    outcomes = {"ok": 0, "err": 0}
    for t in range(300):
        b = bytearray(seeds[t % len(seeds)])
        kind = t % 3
        if kind == 0:
            b = b[: int(rng.integers(0, len(b)))]
        else:
            for _ in range(int(rng.integers(1, 10))):
                b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        try:
            spec.process_encoded(bytes(b), 0, 0, t)
            outcomes["ok"] += 1
        except E.FastqError as e:
            assert str(e)
            outcomes["err"] += 1
    assert outcomes["err"] > 0


# -- max_pixels is checked from the header, before OpenCV allocates --------------------
#
# Each case is a header whose declared size is far over max_pixels, followed by a few
# bytes of (missing) pixel data.  Without the header check OpenCV allocates the whole
# raster (2.7 GB for the first) and then fails on the missing data: a DecodeError after
# the allocation, not an ImageTooLargeError before it.

def _bmp(header_size, w, h, *, short=False):
    info = struct.pack("<I", header_size)
    info += struct.pack("<HHHH", w, h, 1, 24) if short else struct.pack("<iiHHI", w, h, 1, 24, 0)
    info = info.ljust(header_size, b"\0")
    return b"BM" + struct.pack("<IHHI", 14 + len(info) + 16, 0, 0, 14 + len(info)) + info + b"\0" * 16


def _tiff(order, w, h):  # a first directory with ImageWidth twice (libtiff reads both)
    e = "<" if order == b"II" else ">"
    ifd = struct.pack(e + "H", 3) + b"".join(struct.pack(e + "HHII", tag, 4, 1, v) for tag, v in ((256, 8), (256, w), (257, h)))
    return order + struct.pack(e + "HI", 42, 8) + ifd + b"\0" * 16


# the 53-byte input csrc/tests/run_fuzz.sh found in CI (its first byte picks the harness
# configuration): a 39-byte BMP info header declaring 12544x71680
_CI_FINDING = base64.b64decode("BEJNNigAAAD3AAA2AAAAJwAAAAAxAAAAGAEAhAAgAAAAAAD+/v6QiooAAAAAAAAWAC4uAIk=")[1:]

HUGE_HEADERS = {
    "bmp_39_byte_header (CI fuzz finding)": (_CI_FINDING, "BMP image 12544x71680"),
    "bmp_36_byte_header": (_bmp(36, 30000, 30000), "BMP image 30000x30000"),
    "bmp_40_byte_header_top_down": (_bmp(40, 30000, -30000), "BMP image 30000x30000"),
    "bmp_os2_12_byte_header": (_bmp(12, 65535, 65535, short=True), "BMP image 65535x65535"),
    "pnm_with_comments": (b"P6\n# made by a test\n30000\t# width\n 30000\n255\n" + b"\0" * 16, "PNM image 30000x30000"),
    "pgm": (b"P5 40000 20000 65535 " + b"\0" * 16, "PNM image 40000x20000"),
    # found by run_fuzz.sh: OpenCV takes any one byte after a number as its end
    "pnm_number_ended_by_a_letter": (b"P6\n# c\n3000Z 300250\n05\n" + b"\0" * 16, "PNM image 3000x300250"),
    "tiff_little_endian_repeated_width": (_tiff(b"II", 30000, 30000), "TIFF image 30000x30000"),
    "tiff_big_endian": (_tiff(b"MM", 30000, 30000), "TIFF image 30000x30000"),
}


@pytest.mark.parametrize("name", sorted(HUGE_HEADERS))
def test_declared_size_over_max_pixels_is_refused_from_the_header(name):
    data, msg = HUGE_HEADERS[name]
    spec = spec_for([O.RandomResizedCrop(8)], max_pixels=4096)
    with pytest.raises(E.ImageTooLargeError, match=msg + " exceeds max_pixels=4096"):
        spec.process_encoded(data)


def _encode(fmt, img):
    if fmt.startswith("tiff"):  # Pillow puts the directory first; cv2 puts it after the pixels
        from PIL import Image
        if fmt == "tiff_be":  # 16-bit gray is the mode Pillow writes big-endian
            pil = Image.fromarray((cv2.cvtColor(img, cv2.COLOR_BGR2GRAY).astype(np.uint16) * 257).astype(">u2"))
        else:
            pil = Image.fromarray(img[:, :, ::-1])
        buf = io.BytesIO()
        pil.save(buf, "TIFF")
        data = buf.getvalue()
        assert data[:2] == (b"MM" if fmt == "tiff_be" else b"II")
        return data
    if fmt == "bmp_os2":  # a 12-byte OS/2 header, 24-bit rows padded to 4 bytes, bottom-up
        h, w = img.shape[:2]
        stride = (3 * w + 3) & ~3
        rows = b"".join(img[y].tobytes().ljust(stride, b"\0") for y in range(h - 1, -1, -1))
        return b"BM" + struct.pack("<IHHIIHHHH", 26 + len(rows), 0, 0, 26, 12, w, h, 1, 24) + rows
    ext = {"bmp": ".bmp", "ppm": ".ppm", "pgm": ".pgm"}[fmt]
    src = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY) if fmt == "pgm" else img
    return cv2.imencode(ext, src)[1].tobytes()


@pytest.mark.parametrize("fmt", ["bmp", "bmp_os2", "ppm", "pgm", "tiff", "tiff_be"])
def test_header_size_is_the_size_opencv_decodes(fmt, jpegs):
    # the size read from the header is the one cv2.imdecode (the reference) decodes:
    # the whole file at max_pixels=h*w decodes; its header alone (the pixel data cut
    # off) at h*w - 1 is refused as too large, which only the header check can say
    img = cv2.imdecode(np.frombuffer(jpegs[3], np.uint8), cv2.IMREAD_COLOR)[:37, :53]
    data = _encode(fmt, np.ascontiguousarray(img))
    h, w = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED).shape[:2]
    assert (h, w) == (37, 53)
    spec_for([O.CenterCrop(8)], max_pixels=h * w).process_encoded(data)
    with pytest.raises(E.ImageTooLargeError, match=f"image {w}x{h} exceeds max_pixels={h * w - 1}"):
        spec_for([O.CenterCrop(8)], max_pixels=h * w - 1).process_encoded(data[:64])


@pytest.mark.parametrize("header", [b"P6 4Z5 255\n", b"P5 4 5\x00255\x00", b"P6\n#a\r4\t#b\n5\n255 ",
                                    b"P6  4\x0b5\x0c255\n", b"P5\r\n4 5 65535\n"])
def test_pnm_header_is_read_as_opencv_reads_it(header):
    # odd but valid spellings: the size the header check reads is the one cv2 decodes
    n = 4 * 5 * (3 if header[1:2] == b"6" else 1) * (2 if b"65535" in header else 1)
    data = header + bytes(i % 251 for i in range(n))
    h, w = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED).shape[:2]
    assert (h, w) == (5, 4)
    spec_for([O.CenterCrop(2)], max_pixels=20).process_encoded(data)
    with pytest.raises(E.ImageTooLargeError, match="PNM image 4x5 exceeds max_pixels=19"):
        spec_for([O.CenterCrop(2)], max_pixels=19).process_encoded(header)
