"""``fastq prepare --max-side/--max-pixels/--quality`` (fastq/prepare.py +
fq_jpeg_downscale in csrc/image/decode/fq_image_prepare.cpp): opt-in training-resolution
copies.  Checked against pip's cv2 (an independent decoder and resize): sizes, aspect,
pixels close to cv2's INTER_AREA shrink of the original, restart markers parsed here,
no APPn markers (EXIF-free), orientation as stored, lossless path for small images."""
import json
import os
import tarfile

import numpy as np
import pytest

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)
from fastq import errors as E
from fastq import prepare as P
from fastq.cli import main as cli_main
from fastq.bench.testdata import make_bad_files, make_jpeg_dataset

from fastq._native import _image  # noqa: E402
import cv2  # noqa: E402

from test_prepare import _segments  # noqa: E402


def _pixels(data, flag=cv2.IMREAD_UNCHANGED):
    img = cv2.imdecode(np.frombuffer(data, np.uint8), flag)
    assert img is not None
    return img


def _markers(data):
    """The marker codes before the first SOS."""
    p, out = 2, []
    while p < len(data):
        m = data[p + 1]
        out.append(m)
        if m == 0xDA:
            return out
        p += 2 + int.from_bytes(data[p + 2:p + 4], "big")
    raise AssertionError("no SOS")


def _psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255.0 ** 2 / max(mse, 1e-12))


def _with_exif_orientation(data, orientation):
    """data with an APP1 Exif segment (little-endian TIFF, one IFD entry: Orientation)
    inserted after SOI."""
    tiff = (b"II*\x00" + (8).to_bytes(4, "little") + (1).to_bytes(2, "little")
            + (0x0112).to_bytes(2, "little") + (3).to_bytes(2, "little") + (1).to_bytes(4, "little")
            + orientation.to_bytes(2, "little") + b"\x00\x00" + (0).to_bytes(4, "little"))
    body = b"Exif\x00\x00" + tiff
    return data[:2] + b"\xff\xe1" + (len(body) + 2).to_bytes(2, "big") + body + data[2:]


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """Four JPEGs with sides 700-1000 (landscape and portrait)."""
    d = tmp_path_factory.mktemp("resize_src")
    return make_jpeg_dataset(str(d), 4, seed=31, min_side=700, max_side=1000)


def test_downscale_sizes_aspect_pixels(big):
    for path in big:
        data = open(path, "rb").read()
        h, w = _pixels(data).shape[:2]
        new, info = _image.downscale_jpeg(data, 256, 0, 90)
        assert new is not None and info["status"] == "rewritten"
        got = _pixels(new)
        nh, nw = got.shape[:2]
        assert max(nh, nw) == 256 and (info["width"], info["height"]) == (nw, nh)
        f = 256 / max(h, w)
        assert (nw, nh) == (max(1, round(w * f)), max(1, round(h * f)))
        assert abs(nw / nh - w / h) < 2.0 / min(nw, nh)  # aspect kept up to rounding
        ref = cv2.resize(_pixels(data), (nw, nh), interpolation=cv2.INTER_AREA)
        assert _psnr(got, ref) > 30, path  # quality 90 copy of the same shrink
        wseg, hseg, (mcu_w, _), ri, nrst, prog = _segments(new)
        assert (wseg, hseg) == (nw, nh) and not prog
        mcux = -(-nw // mcu_w)
        assert ri == info["restart_interval"] > 0 and mcux % ri == 0 and mcux // ri >= 2 and nrst > 0
        # quality: a lower quality gives a smaller file
        small, _ = _image.downscale_jpeg(data, 256, 0, 50)
        assert len(small) < len(new)
        # max_pixels alone, and both limits at once
        new2, info2 = _image.downscale_jpeg(data, 0, 40000, 90)
        assert info2["width"] * info2["height"] <= 40000
        assert info2["width"] * info2["height"] > 40000 * 0.97
        new3, info3 = _image.downscale_jpeg(data, 150, 40000, 90)
        assert max(info3["width"], info3["height"]) == 150


def test_within_limits_and_other_kinds_are_kept(big):
    data = open(big[0], "rb").read()
    new, info = _image.downscale_jpeg(data, 5000, 0, 90)
    assert new is None and "within the size limit" in info["why"]
    for bad in (dict(max_side=0, max_pixels=0), dict(max_side=-1), dict(max_side=100, quality=0),
                dict(max_side=100, quality=101)):
        with pytest.raises(E.InvalidArgumentError):
            _image.downscale_jpeg(data, **bad)
    assert _image.downscale_jpeg(b"GIF89a....", 10)[1]["why"] == "not a JPEG"
    gray = cv2.imencode(".jpg", cv2.cvtColor(_pixels(data), cv2.COLOR_BGR2GRAY))[1].tobytes()
    new, info = _image.downscale_jpeg(gray, 100)
    assert new is not None and _pixels(new).ndim == 2 and max(_pixels(new).shape) == 100


def test_exif_dropped_orientation_as_stored(big):
    """fastq ignores EXIF orientation (docs/ops.md), so the copy keeps the stored
    orientation and carries no APP1/APPn marker."""
    data = open(big[0], "rb").read()
    h, w = _pixels(data).shape[:2]
    tagged = _with_exif_orientation(data, 6)  # "rotate 90 CW" for readers that apply it
    assert 0xE1 in _markers(tagged)
    new, info = _image.downscale_jpeg(tagged, 300)
    assert not any(0xE0 < m <= 0xEF for m in _markers(new)), _markers(new)
    got = _pixels(new)
    assert (got.shape[1] >= got.shape[0]) == (w >= h)
    plain, _ = _image.downscale_jpeg(data, 300)
    np.testing.assert_array_equal(got, _pixels(plain))


def test_tree_resizes_big_keeps_small_lossless(big, tmp_path):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    for i, p in enumerate(big):
        (src / "a" / f"big{i}.jpg").write_bytes(open(p, "rb").read())
    small = make_jpeg_dataset(str(src / "b"), 2, seed=32, min_side=300, max_side=400)
    cv2.imwrite(str(src / "b" / "x.png"), cv2.imread(big[0])[:900, :900])
    dst = tmp_path / "dst"
    st = P.prepare_tree(str(src), str(dst), max_side=512, quality=85, progress=False)
    assert (st["resized"], st["rewritten"], st["copied"]) == (4, 2, 1), st
    for i in range(len(big)):
        assert max(_pixels((dst / "a" / f"big{i}.jpg").read_bytes()).shape[:2]) == 512
    for p in small:  # at or under N: the lossless path, the same pixels
        out = (dst / "b" / os.path.basename(p)).read_bytes()
        np.testing.assert_array_equal(_pixels(out), _pixels(open(p, "rb").read()))
        assert _segments(out)[3] > 0
    assert (dst / "b" / "x.png").read_bytes() == (src / "b" / "x.png").read_bytes()
    assert json.loads((dst / ".fastq-prepare-resize.json").read_text()) == \
        {"max_side": 512, "max_pixels": None, "quality": 85}
    # rerun with the same settings: all up to date; other settings: everything redone
    assert P.prepare_tree(str(src), str(dst), max_side=512, quality=85, progress=False)["skipped"] == 7
    st = P.prepare_tree(str(src), str(dst), max_side=256, quality=85, progress=False)
    assert st["skipped"] == 0 and st["resized"] == 6
    assert max(_pixels((dst / "a" / "big0.jpg").read_bytes()).shape[:2]) == 256
    # back to lossless: redone, the record removed, the pixels the original's
    st = P.prepare_tree(str(src), str(dst), progress=False)
    assert st["skipped"] == 0 and st["resized"] == 0 and not (dst / ".fastq-prepare-resize.json").exists()
    np.testing.assert_array_equal(_pixels((dst / "a" / "big0.jpg").read_bytes()), _pixels(open(big[0], "rb").read()))


def test_interrupted_run_with_new_settings_forces_the_next(big, tmp_path):
    """A run with other settings that stops on a corrupt file leaves the record marked
    incomplete: the next run with those settings redoes the files the stopped run did
    not reach, instead of keeping their lossless outputs because their mtime matches."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "b.jpg").write_bytes(open(big[0], "rb").read())
    dst = tmp_path / "dst"
    P.prepare_tree(str(src), str(dst), progress=False, jobs=1)  # lossless
    (src / "a.jpg").write_bytes(open(big[1], "rb").read()[:20000])  # first in order: stops the run
    with pytest.raises(E.DecodeError, match="a.jpg"):
        P.prepare_tree(str(src), str(dst), max_side=128, progress=False, jobs=1)
    assert json.loads((dst / ".fastq-prepare-resize.json").read_text()) == {"incomplete": True}
    (src / "a.jpg").unlink()
    st = P.prepare_tree(str(src), str(dst), max_side=128, progress=False)
    assert st["resized"] == 1 and max(_pixels((dst / "b.jpg").read_bytes()).shape[:2]) == 128
    assert json.loads((dst / ".fastq-prepare-resize.json").read_text())["max_side"] == 128


def test_corrupt_input_names_the_file(big, tmp_path):
    src = tmp_path / "s"
    src.mkdir()
    bad = make_bad_files(str(tmp_path / "bad"))
    (src / "t.jpg").write_bytes(open(big[1], "rb").read()[:20000])  # truncated, above the limit
    with pytest.raises(E.DecodeError, match="t.jpg"):
        P.prepare_tree(str(src), str(tmp_path / "d"), max_side=128, progress=False)
    st = P.prepare_tree(str(src), str(tmp_path / "d2"), max_side=128, progress=False, on_error="skip")
    assert len(st["errors"]) == 1 and (tmp_path / "d2" / "t.jpg").read_bytes() == (src / "t.jpg").read_bytes()
    with pytest.raises(E.ImageTooLargeError):  # a header declaring 60000 x 60000
        _image.downscale_jpeg(open(bad["bomb"], "rb").read(), 512)
    for kw in (dict(max_side=0), dict(max_pixels=-5), dict(max_side=100, quality=0)):
        with pytest.raises(ValueError):
            P.prepare_tree(str(src), str(tmp_path / "d3"), progress=False, **kw)


def test_tar_shards_hold_the_shrunk_copies(big, tmp_path):
    src = tmp_path / "src"
    (src / "cls").mkdir(parents=True)
    for i, p in enumerate(big):
        (src / "cls" / f"{i}.jpg").write_bytes(open(p, "rb").read())
    out = tmp_path / "tar"
    st = P.prepare_shards(str(src), str(out), fmt="tar", shard_size=3, max_side=200, progress=False)
    assert st["records"] == 4 and st["out_bytes"] < st["in_bytes"] / 5
    sides = []
    for name in sorted(os.listdir(out)):
        if name.endswith(".tar"):
            with tarfile.open(out / name) as t:
                sides += [max(_pixels(t.extractfile(m).read()).shape[:2]) for m in t.getmembers()
                          if m.name.endswith(".jpg")]
    assert sides == [200] * 4
    manifest = json.loads((out / P.MANIFEST).read_text())
    assert manifest["resize"] == {"max_side": 200, "max_pixels": None, "quality": 90}
    # other settings: every shard is rewritten
    st = P.prepare_shards(str(src), str(out), fmt="tar", shard_size=3, max_side=100, progress=False)
    assert st["written"] == 2 and st["skipped"] == 0
    st = P.prepare_shards(str(src), str(out), fmt="tar", shard_size=3, max_side=100, progress=False)
    assert st["written"] == 0 and st["skipped"] == 2


def test_tfrecord_shards_record_the_new_size(big, tmp_path):
    from fastq.tfrecord_codec import parse_example
    src = tmp_path / "src"
    (src / "cls").mkdir(parents=True)
    (src / "cls" / "0.jpg").write_bytes(open(big[2], "rb").read())
    out = tmp_path / "tfr"
    P.prepare_shards(str(src), str(out), fmt="tfrecord", max_side=160, progress=False)
    (shard,) = [out / n for n in os.listdir(out) if n.endswith(".tfrecord")]
    raw = shard.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    assert len(raw) == 8 + 4 + n + 4  # one record (framing: length, crc, data, crc)
    ex = parse_example(raw[12:12 + n], {"image/encoded", "image/height", "image/width"})
    img = _pixels(ex["image/encoded"][0])
    assert max(img.shape[:2]) == 160 and (ex["image/height"][0], ex["image/width"][0]) == img.shape[:2]


def test_command_line_flags(big, tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "x.jpg").write_bytes(open(big[3], "rb").read())
    assert cli_main(["prepare", str(src), str(tmp_path / "o"), "-q", "--max-side", "300", "--quality", "80"]) == 0
    assert "1 JPEGs shrunk (quality 80)" in capsys.readouterr().out
    assert max(_pixels((tmp_path / "o" / "x.jpg").read_bytes()).shape[:2]) == 300
    assert cli_main(["prepare", str(src), str(tmp_path / "p"), "-q", "--max-pixels", "10000"]) == 0
    out = _pixels((tmp_path / "p" / "x.jpg").read_bytes())
    assert out.shape[0] * out.shape[1] <= 10000
    assert cli_main(["prepare", str(src), str(tmp_path / "q"), "-q", "--quality", "80"]) == 2
    assert "--quality applies only with --max-side" in capsys.readouterr().err
    assert cli_main(["prepare", str(src), str(tmp_path / "r"), "-q", "--max-side", "0"]) == 2
