"""The JPEG decoder's inverse DCT (compile_ops / Pipeline ``idct``): "accurate" (libjpeg's
ISLOW) decodes what PIL decodes, "fast" (IFAST) what TensorFlow's ``tf.io.decode_jpeg``
decodes by default, byte for byte, on the whole-image, ROI and restart-segment paths;
the DCT-scaled decode has one transform, so ``idct`` does not change it.  References:
PIL and TensorFlow (each with its own libjpeg-turbo), not fastq's own output."""
import io

import numpy as np
import pytest

import fastq
from fastq import ops as O
from fastq._native import _image

PIL = pytest.importorskip("PIL.Image", reason="PIL is the accurate transform's reference")
skimage_data = pytest.importorskip("skimage.data", reason="the test photos come from scikit-image")


def _photo(gray=False):
    img = skimage_data.astronaut()[:400, 30:487]  # 400 x 457: not a multiple of the MCU
    return np.asarray(PIL.fromarray(img).convert("L")) if gray else img


def _jpeg(img, quality, subsampling=None):
    b = io.BytesIO()
    kw = {} if subsampling is None else {"subsampling": subsampling}
    PIL.fromarray(img).save(b, "JPEG", quality=quality, **kw)
    return b.getvalue()


CASES = [(q, s) for q in (75, 95) for s in (0, 1, 2)] + [(90, "gray")]


def _case(q, s):
    return _jpeg(_photo(gray=True), q) if s == "gray" else _jpeg(_photo(), q, s)


def _decode(data, idct, chain=None, channels=3, dct_scaling=False):
    chain = chain or [O.CenterCrop((400, 457))]
    c = O.compile_ops(chain, dtype="uint8", channels=channels, dct_scaling=dct_scaling, idct=idct)
    out, _ = _image.ImageSpec(c).process_encoded(data)
    return out


def _tf():
    return pytest.importorskip("tensorflow", reason="TensorFlow's decode_jpeg is the fast transform's reference")


@pytest.mark.parametrize("q,s", CASES, ids=lambda v: str(v))
def test_accurate_equals_pil_and_fast_equals_tensorflow(q, s):
    tf = _tf()
    data = _case(q, s)
    ch = 1 if s == "gray" else 3
    pil = np.asarray(PIL.open(io.BytesIO(data)).convert("L" if ch == 1 else "RGB")).reshape(400, 457, ch)
    tfd = tf.io.decode_jpeg(data, channels=ch).numpy()
    acc, fast = _decode(data, "accurate", channels=ch), _decode(data, "fast", channels=ch)
    np.testing.assert_array_equal(acc, pil)
    np.testing.assert_array_equal(fast, tfd)
    assert not np.array_equal(acc, fast)  # the two transforms do differ on this photo
    # the default is the accurate one
    c = O.compile_ops([O.CenterCrop((400, 457))], dtype="uint8", channels=ch, dct_scaling=False)
    np.testing.assert_array_equal(_image.ImageSpec(c).process_encoded(data)[0], acc)


def test_fast_roi_and_restart_segment_crops_equal_tensorflow():
    """A crop decodes only its region (jpeg_crop_scanline) or, for a JPEG with restart markers,
    a mini-JPEG of the segments it covers: both with the fast transform equal TF's whole
    decode cropped (torchvision's CenterCrop offsets)."""
    tf = _tf()
    cv2 = pytest.importorskip("cv2", reason="cv2 writes the JPEG with restart markers")
    img = np.ascontiguousarray(_photo()[:, :448])  # 28 MCUs of 16 pixels a row: restart intervals of 4 tile it
    plain = _jpeg(img, 90, 2)
    ok, rst = cv2.imencode(".jpg", img[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_RST_INTERVAL, 4,
                                                     cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
                                                     cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420])
    assert ok
    for data, segments in ((plain, False), (rst.tobytes(), True)):
        full = tf.io.decode_jpeg(data, channels=3).numpy()
        for h, w in ((123, 201), (64, 64), (301, 77)):
            y, x = int(round((400 - h) / 2.0)), int(round((448 - w) / 2.0))
            before = _image.segment_decode_count()
            got = _decode(data, "fast", [O.CenterCrop((h, w))])
            assert (_image.segment_decode_count() > before) == segments
            np.testing.assert_array_equal(got, full[y:y + h, x:x + w])


def test_dct_scaled_decode_has_one_transform():
    data = _case(90, 2)
    chain = [O.Resize((100, 114)), O.CenterCrop(96)]
    a = _decode(data, "accurate", chain, dct_scaling=True)
    f = _decode(data, "fast", chain, dct_scaling=True)
    np.testing.assert_array_equal(a, f)
    # and the full-scale decode of the same chain does differ
    assert not np.array_equal(_decode(data, "accurate", chain), _decode(data, "fast", chain))


def test_pipeline_option_and_bad_values(tmp_path):
    data = _case(95, 0)
    p = tmp_path / "a.jpg"
    p.write_bytes(data)
    chain = [O.CenterCrop((400, 457))]
    with fastq.Pipeline(fastq.sources.Files([str(p)] * 3, [0, 1, 2]), batch_size=3, ops=chain, dtype="uint8",
                        dct_scaling=False, idct="fast") as pipe:
        images, _ = next(iter(pipe))
        got = np.array(images)
    for row in got:
        np.testing.assert_array_equal(row, _decode(data, "fast"))
    with pytest.raises(ValueError, match="idct must be one of 'accurate', 'fast', got 'slow'"):
        O.compile_ops(chain, idct="slow")
    with pytest.raises(ValueError, match="idct must be one of"):
        fastq.Pipeline(fastq.sources.Files([str(p)], [0]), batch_size=1, ops=chain, idct="ISLOW")
    with pytest.raises(ValueError, match="idct must be one of"):
        _image.ImageSpec(O.compile_ops(chain).packed_ops, idct=1)
