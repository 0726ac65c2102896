"""Restart-segment crop decode (csrc/image/decode/fq_image_restart_crop.cpp): for JPEGs whose restart interval
tiles each MCU row, the crop is decoded from a mini-JPEG of the segments that cover it.

Identity: for the same (seed, epoch, index) the output bytes equal the plain ROI path's
(the same build with fastq._native._image.set_segment_decode(False)) for every op chain of
tests/ops/test_ops.py, dct_scaling on and off, 4:2:0 / 4:2:2 / 4:4:4 / gray files encoded by
pip's cv2 (an independent libjpeg-turbo) with restart intervals, and files re-encoded by
fastq.prepare; without DCT scaling also equal to cv2.imdecode full decode + the cv2
reference ops (tests/helpers/image_ref.py).  segment_decode_count() proves the new path ran.
"""
import numpy as np
import pytest

from helpers import image_ref as ref  # noqa: I100  (puts the repo root on sys.path)
from fastq import errors as E
from fastq import ops as O
from fastq.bench.testdata import make_jpeg_dataset

from fastq._native import _image  # noqa: E402

import cv2  # noqa: E402

SAMPLING = {"420": (cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420, 16, 16),
            "422": (cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422, 16, 8),
            "444": (cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444, 8, 8),
            "gray": (None, 8, 8)}

# the op chains of tests/ops/test_ops.py (those the decoder can take part in come first)
CHAINS = [
    [O.RandomResizedCrop((48, 40), interpolation="nearest")],
    [O.RandomResizedCrop((48, 40), interpolation="bilinear")],
    [O.RandomResizedCrop((48, 40), interpolation="bicubic")],
    [O.RandomResizedCrop((48, 40), interpolation="area")],
    [O.RandomResizedCrop((48, 40), interpolation="lanczos")],
    [O.Resize(40), O.CenterCrop(32)],
    [O.Resize((30, 50), interpolation="area")],
    [O.CenterCrop((31, 44))],
    [O.CenterCrop(12)],
    [O.RandomCrop((24, 30), padding=(3, 5), padding_mode="reflect", fill=(10, 20, 30))],
    [O.RandomCrop((120, 90))],
    [O.RandomCrop(40, padding=(1, 2, 3, 4), pad_if_needed=True, padding_mode="edge")],
    [O.RandomResizedCrop(32), O.HorizontalFlip(0.5), O.VerticalFlip(0.5), O.Grayscale(0.5)],
    [O.HorizontalFlip(0.7), O.ColorJitter(0.4, 0.4), O.RandomCrop(16), O.VerticalFlip(0.6), O.Grayscale(0.3)],
    [O.CenterCrop(64), O.ColorJitter(brightness=0.5, contrast=0.5, saturation=0.5, hue=0.2)],
    [O.CenterCrop((60, 80)), O.RandomAffine(25, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=(-10, 10, -5, 5),
                                            border="reflect", fill=(255, 0, 128))],
    [O.RandomResizedCrop(40), O.RandomAffine((-90, 90), interpolation="nearest")],
    [O.RandomResizedCrop(224), O.HorizontalFlip(), O.Normalize()],
    [O.RandomResizedCrop((64, 56)), O.Normalize(mean=(0.5, 0.4, 0.3), std=(0.2, 0.3, 0.4))],
]


def _interval(mcux, target=4):
    """A divisor of mcux near target (independent of the C++ choice)."""
    divs = [d for d in range(1, mcux + 1) if mcux % d == 0 and mcux // d >= 2]
    return min(divs, key=lambda d: (abs(np.log(d / target)), d)) if divs else None


def _encode(img, kind, interval):
    params = [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_RST_INTERVAL, int(interval)]
    if kind == "gray":
        img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    else:
        params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, SAMPLING[kind][0]]
    ok, buf = cv2.imencode(".jpg", img, params)
    assert ok
    return buf.tobytes()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{kind: [jpeg bytes]} with a restart interval that tiles each MCU row, plus
    'prepared' (fastq's lossless re-encode of cv2's default 4:2:0 files)."""
    d = tmp_path_factory.mktemp("rst")
    paths = make_jpeg_dataset(str(d / "a"), 4, seed=11)
    paths += make_jpeg_dataset(str(d / "b"), 3, seed=12, min_side=700, max_side=1200)
    out = {k: [] for k in list(SAMPLING) + ["prepared"]}
    for p in paths:
        raw = open(p, "rb").read()
        img = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
        for kind, (_, mw, _) in SAMPLING.items():
            mcux = -(-img.shape[1] // mw)
            iv = _interval(mcux)
            assert iv is not None
            out[kind].append(_encode(img, kind, iv))
        new, info = _image.prepare_jpeg(raw, 4)
        assert new is not None and info["status"] == "rewritten", info
        out["prepared"].append(new)
    return out


def _both(spec, data, seed, epoch, index):
    """(plain path result, segment path result, segment decodes used)."""
    _image.set_segment_decode(False)
    try:
        a = spec.process_encoded(data, seed, epoch, index)
    finally:
        _image.set_segment_decode(True)
    c0 = _image.segment_decode_count()
    b = spec.process_encoded(data, seed, epoch, index)
    return a, b, _image.segment_decode_count() - c0


@pytest.mark.parametrize("dct", [False, True])
@pytest.mark.parametrize("kind", list(SAMPLING) + ["prepared"])
def test_identical_to_plain_path(files, kind, dct):
    channels = 1 if kind == "gray" else 3
    used = crops = 0
    for ci, chain in enumerate(CHAINS):
        float_out = any(isinstance(o, O.Normalize) for o in chain)
        for layout in (("NHWC", "NCHW") if float_out else ("NHWC",)):
            spec = _image.ImageSpec(O.compile_ops(chain, dtype="float32" if float_out else "uint8",
                                                  layout=layout, channels=channels, dct_scaling=dct))
            for fi, data in enumerate(files[kind]):
                for index in range(2):
                    (o1, ex1), (o2, ex2), n = _both(spec, data, 5, ci, 10 * fi + index)
                    assert ex1 == ex2
                    assert o1.tobytes() == o2.tobytes(), f"{kind} file {fi} chain {ci} {layout}: {ex2}"
                    used += n
                    crops += ex2["roi_used"]
    # the segment path ran for most ROI decodes (it declines when a crop spans the row)
    assert crops > 0 and used >= 0.5 * crops, (used, crops)


@pytest.mark.parametrize("kind", list(SAMPLING) + ["prepared"])
@pytest.mark.parametrize("first", ["rrc", "center", "random"])
def test_bit_exact_with_cv2_full_decode(files, kind, first):
    op = {"rrc": O.RandomResizedCrop((64, 56)), "center": O.CenterCrop((100, 150)),
          "random": O.RandomCrop((120, 90))}[first]
    chain = [op, O.HorizontalFlip()]
    gray = kind == "gray"
    spec = _image.ImageSpec(O.compile_ops(chain, dtype="uint8", channels=1 if gray else 3, dct_scaling=False))
    c0 = _image.segment_decode_count()
    for fi, data in enumerate(files[kind]):
        full = ref.cv2_decode_rgb(data, gray=gray)
        for i in range(3):
            out, ex = spec.process_encoded(data, 9, 0, 3 * fi + i)
            assert ex["decode_scale"] == (8, 8)
            want = ref.replay(full if full.ndim == 3 else full[:, :, None], ex, chain)
            np.testing.assert_array_equal(out.reshape(want.shape), want, err_msg=str(ex))
    assert _image.segment_decode_count() > c0


def _dri(data):
    i = data.find(b"\xff\xdd")
    return int.from_bytes(data[i + 4:i + 6], "big") if i >= 0 else 0


def test_declines_when_segments_do_not_tile_rows(files):
    """Interval not dividing the MCUs per row, no restart markers, progressive: the
    plain path runs (count unchanged) and the output is the same."""
    raw = open(make_jpeg_dataset("/tmp/fastq_rst_decline", 1, seed=13)[0], "rb").read()
    img = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
    mcux = -(-img.shape[1] // 16)
    bad_iv = next(k for k in range(3, 50) if mcux % k)
    cases = [_encode(img, "420", bad_iv), raw]
    ok, prog = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1, cv2.IMWRITE_JPEG_RST_INTERVAL, 2])
    cases.append(prog.tobytes())
    assert _dri(cases[0]) == bad_iv and _dri(cases[1]) == 0
    spec = _image.ImageSpec(O.compile_ops([O.RandomResizedCrop((64, 56))], dtype="uint8"))
    for data in cases:
        for i in range(4):
            (o1, _), (o2, ex), n = _both(spec, data, 1, 2, i)
            assert n == 0 and ex["roi_used"]
            np.testing.assert_array_equal(o1, o2)


def test_corrupt_restart_data_behaves_like_plain_path(files):
    """Misnumbered RST marker, truncation, garbage inside a segment: same verdict
    (exception class, or identical output) as the plain ROI path."""
    data = files["prepared"][0]
    sos = data.find(b"\xff\xda")
    rst = [i for i in range(sos, len(data) - 1) if data[i] == 0xFF and 0xD0 <= data[i + 1] <= 0xD7]
    assert len(rst) > 4
    k = rst[len(rst) // 2]
    misnumbered = data[:k + 1] + bytes([0xD0 + (data[k + 1] - 0xD0 + 3) % 8]) + data[k + 2:]
    truncated = data[: len(data) * 3 // 4]
    garbage = bytearray(data)
    for j in range(rst[1] + 2, rst[1] + 40):
        garbage[j] = 0x5A if garbage[j] != 0xFF else 0xFF
    spec = _image.ImageSpec(O.compile_ops([O.RandomResizedCrop((64, 56), scale=(0.9, 1.0))], dtype="uint8"))
    for case in (misnumbered, truncated, bytes(garbage)):
        for i in range(3):
            res = []
            for on in (False, True):
                _image.set_segment_decode(on)
                try:
                    res.append(spec.process_encoded(case, 0, 0, i)[0].tobytes())
                except E.FastqError as e:
                    res.append(type(e))
                finally:
                    _image.set_segment_decode(True)
            assert res[0] == res[1]
    with pytest.raises(E.DecodeError, match="truncated|Premature end"):
        spec.process_encoded(truncated, 0, 0, 0)
