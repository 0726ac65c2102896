"""``fastq prepare`` (fastq/prepare.py + csrc/image/decode/fq_image_prepare.cpp): lossless re-encode
with restart markers.  Checked against independent readers: pip's cv2 decodes every
prepared JPEG to exactly the original's pixels, the restart interval and SOF are parsed
here in Python, non-JPEG files compare byte for byte, and the tree is compared with
os.walk."""
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)
from fastq import errors as E
from fastq import prepare as P
from fastq.cli import main as cli_main
from fastq.bench.entropy import jpeg_layout
from fastq.bench.testdata import make_bad_files, make_jpeg_dataset

from fastq._native import _image  # noqa: E402
import cv2  # noqa: E402


def _segments(data):
    """(width, height, (mcu_w, mcu_h), restart_interval, number of RST markers,
    progressive) parsed from the JPEG's markers in Python (fastq.bench.entropy's
    marker walk, independent of the C++ rewriter)."""
    L = jpeg_layout(data)
    return L.width, L.height, (L.mcu_w, L.mcu_h), L.restart_interval, len(L.rst), L.sof == 0xC2


def _pixels(data, flag=cv2.IMREAD_UNCHANGED):
    img = cv2.imdecode(np.frombuffer(data, np.uint8), flag)
    assert img is not None
    return img


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("prep")
    src = root / "src"
    photos = make_jpeg_dataset(str(src / "cls_a"), 5, seed=21)
    photos += make_jpeg_dataset(str(src / "cls_b" / "deep"), 3, seed=22, min_side=700, max_side=1000)
    img = _pixels(open(photos[0], "rb").read(), cv2.IMREAD_COLOR)
    extra = {
        "cls_b/s422.jpg": cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
                                                    cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422])[1].tobytes(),
        "cls_b/s444.jpg": cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
                                                    cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444])[1].tobytes(),
        "cls_b/gray.JPEG": cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_BGR2GRAY))[1].tobytes(),
        "cls_b/prog.jpg": cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes(),
        "cls_a/picture.png": cv2.imencode(".png", img)[1].tobytes(),
        "cls_a/labels.txt": b"not an image\n",
        "empty.bin": b"",
        "tiny.jpg": cv2.imencode(".jpg", img[:12, :12])[1].tobytes(),  # one MCU column
    }
    for rel, data in extra.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    bad = make_bad_files(str(root / "bad"))
    if os.path.exists(bad.get("cmyk", "")):
        (src / "cmyk.jpg").write_bytes(open(bad["cmyk"], "rb").read())
    dst = root / "dst"
    stats = P.prepare_tree(str(src), str(dst), progress=False)
    return src, dst, stats, bad


def _files(root):
    out = set()
    for r, _, fs in os.walk(root):
        out.update(os.path.relpath(os.path.join(r, f), root) for f in fs)
    return out


def test_tree_mirrored_and_pixels_identical(tree):
    src, dst, stats, _ = tree
    rels = _files(src)
    assert _files(dst) == rels and stats["files"] == len(rels)
    rewritten = 0
    for rel in sorted(rels):
        a, b = (src / rel).read_bytes(), (dst / rel).read_bytes()
        if a[:3] != b"\xff\xd8\xff":
            assert a == b, rel  # non-JPEGs byte-identical
            continue
        np.testing.assert_array_equal(_pixels(a), _pixels(b), err_msg=rel)
        if a != b:
            rewritten += 1
            w, h, (mcu_w, mcu_h), ri, nrst, prog = _segments(b)
            mcux = -(-w // mcu_w)
            assert not prog and ri > 0 and mcux % ri == 0 and mcux // ri >= 2, rel
            assert nrst == (mcux // ri) * -(-h // mcu_h) - 1, rel
    assert rewritten == stats["rewritten"] >= 11
    assert stats["copied"] == 3 and stats["kept"] >= 1  # tiny.jpg (and cmyk.jpg) kept
    assert (dst / "tiny.jpg").read_bytes() == (src / "tiny.jpg").read_bytes()


def test_rerun_skips_and_force_redoes(tree):
    src, dst, stats, _ = tree
    mtimes = {rel: os.stat(dst / rel).st_mtime_ns for rel in _files(dst)}
    again = P.prepare_tree(str(src), str(dst), progress=False)
    assert again["skipped"] == stats["files"] and again["rewritten"] == 0
    assert {rel: os.stat(dst / rel).st_mtime_ns for rel in _files(dst)} == mtimes
    # a changed source is redone; a prepared file fed back in is kept unchanged
    rel = "cls_a/000000.jpg"
    os.utime(src / rel, ns=(0, os.stat(src / rel).st_mtime_ns + 10**9))
    third = P.prepare_tree(str(src), str(dst), progress=False)
    assert third["rewritten"] == 1 and third["skipped"] == stats["files"] - 1
    new, info = _image.prepare_jpeg((dst / rel).read_bytes())
    assert new is None and "already" in info["why"]


def test_prepared_files_use_segment_decode(tree):
    from fastq import ops as O
    src, dst, _, _ = tree
    spec = _image.ImageSpec(O.compile_ops([O.RandomResizedCrop(96), O.Normalize()]))
    c0 = _image.segment_decode_count()
    for i, rel in enumerate(sorted(r for r in _files(src) if r.startswith("cls_a/0"))):
        a, _ = spec.process_encoded((src / rel).read_bytes(), 0, 0, i)
        b, _ = spec.process_encoded((dst / rel).read_bytes(), 0, 0, i)
        assert a.tobytes() == b.tobytes()
    assert _image.segment_decode_count() > c0


def test_corrupt_jpeg(tree, tmp_path):
    _, _, _, bad = tree
    src = tmp_path / "s"
    src.mkdir()
    (src / "t.jpg").write_bytes(open(bad["truncated"], "rb").read())
    with pytest.raises(E.DecodeError, match="t.jpg"):
        P.prepare_tree(str(src), str(tmp_path / "d"), progress=False)
    st = P.prepare_tree(str(src), str(tmp_path / "d2"), progress=False, on_error="skip")
    assert len(st["errors"]) == 1 and (tmp_path / "d2" / "t.jpg").read_bytes() == (src / "t.jpg").read_bytes()


def test_interval_choice_and_bad_arguments(tmp_path):
    data = open(make_jpeg_dataset(str(tmp_path / "x"), 1, seed=23)[0], "rb").read()
    for target in (1, 2, 4, 8):
        new, info = _image.prepare_jpeg(data, target)
        mcux = info["mcus_per_row"]
        divs = [d for d in range(1, mcux // 2 + 1) if mcux % d == 0]  # >= 2 segments per row
        best = min(divs, key=lambda d: (max(d / target, target / d), d))
        assert new is not None and info["restart_interval"] == best == _segments(new)[3]
    with pytest.raises(E.InvalidArgumentError):
        _image.prepare_jpeg(data, 0)
    assert cli_main(["prepare", str(tmp_path / "nope"), str(tmp_path / "out"), "-q"]) == 2
    with pytest.raises(ValueError):
        P.prepare_tree(str(tmp_path), str(tmp_path / "inside"), progress=False)


def test_command_line(tree, tmp_path):
    src, _, _, _ = tree
    env = dict(os.environ, PYTHONPATH=image_ref.ROOT)
    r = subprocess.run([sys.executable, "-m", "fastq", "prepare", str(src), str(tmp_path / "o"), "-q", "-j", "2"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "JPEGs re-encoded" in r.stdout and "%" in r.stdout
    assert _files(tmp_path / "o") == _files(src)
    # the library module is not a command (it would import the command line: issue 29)
    r = subprocess.run([sys.executable, "-m", "fastq.prepare", str(src), str(tmp_path / "p")], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 1 and "`python -m fastq prepare SRC DST`" in r.stderr, r.stderr
    assert not (tmp_path / "p").exists()


def test_kept_and_converted_kinds():
    """Lossless (SOF3) and 12-bit headers are kept, not errors; progressive input becomes
    baseline with restart segments and the same pixels."""
    img = np.random.default_rng(1).integers(0, 256, (64, 96, 3), np.uint8)
    b = cv2.imencode(".jpg", img)[1].tobytes()
    i = b.find(b"\xff\xc0")
    sof3 = b[:i + 1] + b"\xc3" + b[i + 2:]
    p12 = b[:i + 4] + b"\x0c" + b[i + 5:]
    for data, why in ((sof3, "lossless"), (p12, "8-bit"), (b"GIF89a....", "not a JPEG")):
        new, info = _image.prepare_jpeg(data)
        assert new is None and info["status"] == "kept" and why in info["why"]
    prog = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes()
    new, info = _image.prepare_jpeg(prog)
    assert info["status"] == "rewritten" and not _segments(new)[5] and _segments(new)[3] == info["restart_interval"]
    np.testing.assert_array_equal(_pixels(new), _pixels(prog))
