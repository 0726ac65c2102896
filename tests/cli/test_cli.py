"""The fastq command, run as a subprocess (python -m fastq) with PYTHONPATH set.

References: the installed peers are found with importlib (not by fastq), the PNG
files are read back with Pillow and matplotlib, crop boxes come from
Pipeline.explain in this process and are replayed with cv2, and the native
library versions are checked against the libraries this process actually mapped
(/proc/self/maps) and their Debian packages (dpkg-query).
"""
import importlib.util
import json
import os
import subprocess

import cv2
import numpy as np
import pytest
from PIL import Image

import fastq
from fastq import ops
from fastq.bench import testdata
from fastq.cli import CliError
from fastq.cli.show import BOX_COLOR, parse_ops

from helpers.cli_runner import installed, run_cli  # noqa: I100


@pytest.fixture(scope="module")
def jpeg_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_jpegs")
    testdata.make_jpeg_dataset(str(d / "a"), 40, seed=5, min_side=200, max_side=420)
    testdata.make_jpeg_dataset(str(d / "b" / "c"), 30, seed=6, min_side=200, max_side=420)
    return str(d)


def nonwhite_fraction(img):
    a = np.asarray(img.convert("RGB")).astype(int)
    return float((a.sum(axis=2) < 3 * 245).mean())


# ---------------------------------------------------------------------------
# bench
# ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.tf
@pytest.mark.tensorpack
def test_bench_quick_json_has_every_installed_peer_and_the_png_is_a_chart(tmp_path):
    out_json, out_png = tmp_path / "b.json", tmp_path / "b.png"
    r = run_cli("bench", "--quick", "--scaling", "1,2", "--no-progress", "--data-dir", str(tmp_path / "data"),
                "--json", str(out_json), "--plot", str(out_png))
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out_json.read_text())
    expect = {"fastq": True, "tfdata": installed("tensorflow"), "tensorpack": installed("tensorpack", "cv2"),
              "pyloop": installed("cv2"), "dali": importlib.util.find_spec("nvidia") is not None
              and installed("nvidia.dali")}
    for peer, present in expect.items():
        if present:
            assert peer in res["peers"], (peer, res["failed"])
            s = res["peers"][peer]
            assert s["images_per_epoch"] == 128 and s["images_per_s"] > 0 and len(s["runs"]) == 1
            assert s["fastq_over_peer"] == pytest.approx(res["peers"]["fastq"]["images_per_s"] / s["images_per_s"])
            assert s["label"] in r.stdout
        else:
            assert peer in res["not_installed"] and peer not in res["peers"]
            assert "not installed" in r.stdout
    assert not res["failed"]
    assert set(res["scaling"]) == {"1", "2"} and "fastq@1" in res["peers"]
    assert res["task"]["name"] == "reference" and res["task"]["images"] == 128
    # the PNG, read back by two libraries
    import matplotlib.image as mpimg
    arr = mpimg.imread(str(out_png))
    assert arr.ndim == 3 and arr.shape[0] >= 300 and arr.shape[1] >= 800
    img = Image.open(out_png)
    assert img.format == "PNG" and img.size == (arr.shape[1], arr.shape[0])
    assert 0.03 < nonwhite_fraction(img) < 0.9
    colors = {c for _, c in img.convert("RGB").getcolors(1 << 24)}
    assert (217, 95, 2) in colors and (27, 158, 119) in colors  # fastq's bars and the peers' bars
    assert len(colors) > 50


def test_bench_on_a_folder_counts_files_recursively(jpeg_dir, tmp_path):
    out_json = tmp_path / "f.json"
    r = run_cli("bench", jpeg_dir, "--quick", "--peers", "fastq", "--no-progress", "--task", "small-96",
                "--json", str(out_json))
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out_json.read_text())
    assert list(res["peers"]) == ["fastq"]
    assert res["peers"]["fastq"]["images_per_epoch"] == 64  # 70 files, batches of 64, remainder dropped
    assert "70 of 70 image files" in res["task"]["data"]
    assert res["task"]["size"] == 96


def test_bench_task_feed_on_a_folder(tmp_path):
    d = tmp_path / "jpegs"
    testdata.make_jpeg_dataset(str(d), 200, seed=7, min_side=200, max_side=300)
    out_json = tmp_path / "feed.json"
    r = run_cli("bench", str(d), "--task", "feed", "--peers", "fastq", "--feed-settings", "a=1:20", "--rounds", "1",
                "--run-ahead", "3", "--no-progress", "--json", str(out_json))
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out_json.read_text())
    assert list(res["feeders"]) == ["fastq"] and res["trainer"]["run_ahead"] == 3
    assert res["task"]["images"] == 200 and res["task"]["skip"] == 1 and res["task"]["timed_batches"] == 2
    m = res["feeders"]["fastq"]["settings"]["a"]
    assert m["images_per_s"] > 0 and m["trainer_alone"] == pytest.approx(64 / 0.02, rel=1e-6)
    assert "a: C 1 ms (took " in r.stdout and "fed/ideal" in r.stdout


def test_find_images_folder_glob_and_list(jpeg_dir, tmp_path):
    from fastq.bench import BenchInputError, find_images
    every = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(jpeg_dir) for f in fs if f.endswith(".jpg"))
    assert find_images(jpeg_dir) == every
    assert find_images(os.path.join(jpeg_dir, "**", "*.jpg")) == every
    lst = tmp_path / "list.txt"
    rel = [os.path.relpath(p, tmp_path) for p in every[:5]]
    lst.write_text("# my files\n" + "\n".join(rel) + "\n\n")
    assert find_images(str(lst)) == every[:5]
    lst.write_text(every[0] + "\n" + str(tmp_path / "gone.jpg") + "\n")
    with pytest.raises(BenchInputError, match="gone.jpg"):
        find_images(str(lst))


# ---------------------------------------------------------------------------
# show
# ---------------------------------------------------------------------------

def test_show_draws_the_explain_crop_boxes_and_the_augmented_crops(jpeg_dir, tmp_path):
    out, side = tmp_path / "grid.png", tmp_path / "grid.json"
    r = run_cli("show", jpeg_dir, "--ops", "RandomResizedCrop(160, scale=(0.2, 0.6)),HorizontalFlip()",
                "--n", "6", "--seed", "3", "--epoch", "1", "--out", str(out), "--json", str(side))
    assert r.returncode == 0, r.stderr
    cells = json.loads(side.read_text())["cells"]
    paths = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(jpeg_dir) for f in fs if f.endswith(".jpg"))
    chain = [ops.RandomResizedCrop(160, scale=(0.2, 0.6)), ops.HorizontalFlip()]
    sheet = np.asarray(Image.open(out).convert("RGB"))
    with fastq.Pipeline(fastq.sources.Files(paths), batch_size=1, ops=chain, dtype="uint8", seed=3,
                        pin_memory=False) as p:
        explains = [p.explain(1, i) for i in range(6)]
    assert len(cells) == 6
    flips = set()
    for i, (cell, ex) in enumerate(zip(cells, explains)):
        assert cell["index"] == i and cell["path"] == paths[i]
        assert tuple(cell["explain"]["crop_src"]) == tuple(ex["crop_src"])
        assert cell["explain"]["hflip"] == ex["hflip"]
        flips.add(ex["hflip"])
        src = cv2.cvtColor(cv2.imread(paths[i]), cv2.COLOR_BGR2RGB)
        H, W = src.shape[:2]
        s = 224 / max(H, W)
        cx, cy = cell["thumb"]["x"], cell["thumb"]["y"]
        bx, by, bw, bh = ex["crop_src"]
        x0, y0 = cx + round(bx * s), cy + round(by * s)
        x1, y1 = cx + round((bx + bw) * s) - 1, cy + round((by + bh) * s) - 1
        edges = np.concatenate([sheet[y0, x0:x1 + 1], sheet[y1, x0:x1 + 1], sheet[y0:y1 + 1, x0],
                                sheet[y0:y1 + 1, x1]])
        assert (edges == BOX_COLOR).all(axis=1).mean() > 0.97, i
        inside = sheet[y0 + 3:y1 - 2, x0 + 3:x1 - 2]
        assert (inside == BOX_COLOR).all(axis=2).mean() < 0.2  # a frame, not a filled block
        # the augmented tile is the drawn crop, replayed with cv2
        ox, oy = cell["out"]["x"], cell["out"]["y"]
        tile = sheet[oy:oy + 160, ox:ox + 160].astype(np.float32)
        ref = cv2.resize(src[by:by + bh, bx:bx + bw], (160, 160), interpolation=cv2.INTER_LINEAR)
        if ex["hflip"]:
            ref = ref[:, ::-1]
        assert np.abs(tile - ref).mean() < 6, i
        other = cv2.resize(src, (160, 160), interpolation=cv2.INTER_LINEAR)
        assert np.abs(tile - other).mean() > np.abs(tile - ref).mean()
    assert flips == {True, False}


def test_show_with_color_jitter_reports_the_factors(jpeg_dir, tmp_path):
    out, side = tmp_path / "g.png", tmp_path / "g.json"
    r = run_cli("show", jpeg_dir, "--ops", "RandomResizedCrop(224),HorizontalFlip(),ColorJitter(0.4,0.4,0.4)",
                "--n", "3", "--out", str(out), "--json", str(side))
    assert r.returncode == 0, r.stderr
    cells = json.loads(side.read_text())["cells"]
    for c in cells:
        jit = [o for o in c["explain"]["ops"] if o["op"] == "ColorJitter"][0]
        assert 0.6 <= jit["brightness"] <= 1.4 and sorted(jit["order"]) == ["brightness", "contrast", "saturation"]
    img = Image.open(out)
    assert img.width >= 3 * (224 + 224) and nonwhite_fraction(img) > 0.3


def test_parse_ops_builds_fastq_ops_without_eval():
    assert parse_ops("RandomResizedCrop(224, scale=(0.5, 1.0)), HorizontalFlip(p=0.3),ColorJitter(0.4,0.4,0.4)") == [
        ops.RandomResizedCrop(224, scale=(0.5, 1.0)), ops.HorizontalFlip(0.3), ops.ColorJitter(0.4, 0.4, 0.4)]
    assert parse_ops("RandomAffine(degrees=(-10, +5.5), translate=[0.1, 0.1])") == [
        ops.RandomAffine(degrees=(-10, 5.5), translate=(0.1, 0.1))]
    for bad, why in [("__import__('os').system('true')", "not an op call"), ("os.system('x')", "not an op call"),
                     ("Foo()", "unknown op 'Foo'"), ("HorizontalFlip(p=x)", "only numbers"),
                     ("HorizontalFlip(p=1+1)", "only numbers"), ("HorizontalFlip(", "invalid syntax"),
                     ("Resize(**{'size': 3})", "not allowed"), ("", "empty"),
                     ("RandomResizedCrop(0)", "RandomResizedCrop: size")]:
        with pytest.raises(CliError, match=why):
            parse_ops(bad)


# ---------------------------------------------------------------------------
# info
# ---------------------------------------------------------------------------

def mapped_library(prefix):
    """Path of the shared library this process mapped whose file name starts with prefix."""
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if os.path.basename(p).startswith(prefix):
                return os.path.realpath(p)
    raise AssertionError(f"{prefix} is not mapped")


def dpkg_version(path):
    pkg = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True, check=True).stdout
    pkg = pkg.split("\n")[0].split(": ")[0]
    ver = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True,
                         check=True).stdout
    return pkg, ver


def upstream(debian_version):
    """'1:2.1.5-2' -> '2.1.5', '4.6.0+dfsg-12' -> '4.6.0'."""
    v = debian_version.split(":", 1)[-1].rsplit("-", 1)[0]
    return v.split("+")[0]


def _links_shared(so, prefix):
    needed = subprocess.run(["readelf", "-d", so], capture_output=True, text=True, check=True).stdout
    return f"[{prefix}" in needed


@pytest.mark.tf
def test_info_names_the_native_libraries_actually_linked():
    from fastq._native import _image  # maps the libraries fastq links into this process
    so = os.path.realpath(_image.__file__)
    if not _links_shared(so, "libjpeg.so") and not _links_shared(so, "libopencv_core.so"):
        # a wheel: both are static inside _image (scripts/build_deps.sh: Debian 12's 2.1.5 and 4.6.0)
        r = run_cli("info", "--json")
        assert r.returncode == 0, r.stderr
        nv = json.loads(r.stdout)["native"]
        assert os.path.realpath(nv["libjpeg_library"]) == os.path.realpath(nv["opencv_library"]) == so, nv
        assert nv["libjpeg_package"] is None and nv["opencv_package"] is None
        assert nv["libjpeg_turbo"] == "2.1.5" and nv["opencv"] == _image.native_versions()["opencv"] == "4.6.0"
        return
    jpeg_lib, cv_lib = mapped_library("libjpeg.so"), mapped_library("libopencv_core.so")
    jpeg_pkg, jpeg_ver = dpkg_version(jpeg_lib)
    cv_pkg, cv_ver = dpkg_version(cv_lib)
    r = run_cli("info", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    nv = info["native"]
    assert nv["libjpeg_library"] == jpeg_lib and nv["opencv_library"] == cv_lib
    assert nv["libjpeg_turbo"] == upstream(jpeg_ver) and "turbo" in jpeg_pkg
    assert nv["opencv"] == upstream(cv_ver) == _image.native_versions()["opencv"]
    assert nv["libjpeg_package"] == {"name": jpeg_pkg, "version": jpeg_ver}
    assert nv["opencv_package"] == {"name": cv_pkg, "version": cv_ver}
    assert info["fastq"]["version"] == fastq.__version__
    assert info["cpu"]["usable"] == len(os.sched_getaffinity(0))
    assert set(info["frameworks"]) >= {"tensorflow", "torch", "jax"}
    assert (info["frameworks"]["tensorflow"] is None) == (importlib.util.find_spec("tensorflow") is None)
    assert isinstance(info["cuda"]["pinning_ok"], bool) and info["cuda"]["pinning"]
    text = run_cli("info")
    assert text.returncode == 0
    assert f"libjpeg-turbo {upstream(jpeg_ver)}" in text.stdout and jpeg_lib in text.stdout
    assert f"OpenCV {upstream(cv_ver)}" in text.stdout and cv_lib in text.stdout
    assert "pinned slot memory" in text.stdout and "CUDA runtime" in text.stdout


# ---------------------------------------------------------------------------
# errors and help
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["bench", "/no/such/folder"], "/no/such/folder: no such file or folder"),
    (["bench", "EMPTY"], "no image files"),
    (["bench", "--rounds", "0"], "--rounds"),
    (["bench", "--peers", "fastq,nope"], "unknown peer 'nope'"),
    (["bench", "--task", "feed", "--peers", "fastq,nope"], "unknown feeder 'nope'"),
    (["bench", "--task", "feed", "--feed-settings", "1:x"], "'1:x' is not C:D"),
    (["bench", "--feed-settings", "1:2"], "need --task feed"),
    (["bench", "JPEGS", "--task", "feed"], "70 images make 1 batch(es) of 64"),
    (["show", "/no/such/folder", "--ops", "HorizontalFlip()"], "no such file or folder"),
    (["show", "JPEGS", "--ops", "Blur(3)"], "bad op string: unknown op 'Blur'"),
    (["show", "JPEGS", "--ops", "RandomResizedCrop(224"], "bad op string: invalid syntax"),
    (["show", "JPEGS", "--ops", "exec('1')"], "bad op string"),
    (["show", "JPEGS"], "--ops"),
    (["nosuchcommand"], "invalid choice"),
])
def test_errors_are_one_line_with_exit_status_2(args, needle, jpeg_dir, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not an image")
    sub = {"EMPTY": str(empty), "JPEGS": jpeg_dir}
    r = run_cli(*[sub.get(a, a) for a in args])
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("fastq") and "error:" in lines[0] and needle in lines[0], lines[0]
    assert "Traceback" not in r.stderr


def test_help_on_every_subcommand():
    from fastq.cli import COMMANDS as _COMMANDS
    names = [c[0] for c in _COMMANDS]
    assert {"bench", "show", "info"} <= set(names)
    top = run_cli("--help")
    assert top.returncode == 0
    for n in names:
        assert n in top.stdout
        r = run_cli(n, "--help")
        assert r.returncode == 0 and r.stdout.startswith(f"usage: fastq {n}"), r.stderr
    assert run_cli().returncode == 2
    v = run_cli("--version")
    assert v.returncode == 0 and v.stdout.strip() == f"fastq {fastq.__version__}"
