"""The ``hires`` bench task and its generator (fastq.bench.testdata.make_hires_dataset,
fastq.bench.data.generated_dataset(kind="hires")): deterministic, sized as stated,
dense entropy data; the task runs the reference chain."""
import os

import pytest

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)
from fastq.bench import data as D
from fastq.bench import testdata
from fastq.bench.tasks import REFERENCE, TASKS, task_from_dict

import cv2  # noqa: E402


def test_generator_is_deterministic_and_sized(tmp_path):
    a = testdata.make_hires_dataset(str(tmp_path / "a"), 3, seed=5, min_width=300, max_width=420)
    b = testdata.make_hires_dataset(str(tmp_path / "b"), 3, seed=5, min_width=300, max_width=420)
    c = testdata.make_hires_dataset(str(tmp_path / "c"), 3, seed=6, min_width=300, max_width=420)
    ra = [open(p, "rb").read() for p in a]
    assert ra == [open(p, "rb").read() for p in b]
    assert ra != [open(p, "rb").read() for p in c]
    for p in a:
        img = cv2.imread(p)
        assert img is not None and 300 <= max(img.shape[:2]) <= 420
        assert 1.3 <= max(img.shape[:2]) / min(img.shape[:2]) <= 1.8
    with pytest.raises(ValueError):
        testdata.make_hires_dataset(str(tmp_path / "d"), 1, min_width=500, max_width=400)


def test_full_size_image_is_camera_like(tmp_path):
    (p,) = testdata.make_hires_dataset(str(tmp_path), 1, seed=0)
    img = cv2.imread(p)
    assert 1800 <= max(img.shape[:2]) <= 3200
    # sensor-like noise keeps the entropy data dense: > 1.2 bits per pixel at quality 92
    assert os.path.getsize(p) * 8 / (img.shape[0] * img.shape[1]) > 1.2


def test_hires_task_and_generated_set(tmp_path, monkeypatch):
    t = TASKS["hires"]
    assert t.data == "hires" and REFERENCE.data == "jpeg"
    assert t.describe() == REFERENCE.describe()
    assert [type(o).__name__ for o in t.fastq_ops()] == [type(o).__name__ for o in REFERENCE.fastq_ops()]
    assert task_from_dict(t.to_dict()).data == "hires"
    old = {k: v for k, v in REFERENCE.to_dict().items() if k != "data"}
    assert task_from_dict(old).data == "jpeg"  # a dict written before the field existed
    with pytest.raises(D.BenchInputError, match="unknown generated set"):
        D.generated_dataset(2, str(tmp_path), kind="nope")
    calls = []
    real = testdata.make_hires_dataset

    def small(out_dir, n, **kw):
        calls.append(n)
        return real(out_dir, n, min_width=200, max_width=260, **kw)

    monkeypatch.setattr(testdata, "make_hires_dataset", small)
    paths = D.generated_dataset(2, str(tmp_path), progress=False, out=lambda m: None, kind="hires")
    assert [os.path.basename(os.path.dirname(p)) for p in paths] == ["hires_2_seed0"] * 2
    assert D.generated_dataset(2, str(tmp_path), progress=False, out=lambda m: None, kind="hires") == paths
    assert calls == [2]  # the second call reused the cached set


# ---- fastq bench --task hires --hires-forms (fastq.bench.hires) -------------------------

def test_hires_forms_are_validated():
    from fastq.bench import hires
    assert hires.parse_forms(["prepared", "max512", "MAX512"]) == ["original", "prepared", "max512"]
    for bad in ("max", "max8", "lossy", "max512px"):
        with pytest.raises(D.BenchInputError, match="--hires-forms"):
            hires.parse_forms([bad])


def test_crop_quality_psnr_and_ssim(tmp_path):
    """PSNR / SSIM of the same RRC boxes: 1.0 and >= 99 dB for an identical copy; for a
    512 px copy the figures equal a recomputation with skimage's PSNR and SSIM on the
    same renders, and are below the identical copy's."""
    import numpy as np
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity
    from fastq.bench import hires
    from fastq.prepare import prepare_tree
    src = tmp_path / "src"
    paths = testdata.make_hires_dataset(str(src), 3, seed=1, min_width=900, max_width=1100)
    q = hires.crop_quality(paths, paths, crops=3)
    assert q["crops"] == 9 and q["ssim_median"] == pytest.approx(1.0) and q["psnr_p5_db"] >= 99
    prepare_tree(str(src), str(tmp_path / "m"), max_side=512, progress=False)
    copies = [str(tmp_path / "m" / os.path.basename(p)) for p in paths]
    q = hires.crop_quality(paths, copies, crops=3, seed=4)
    rng = np.random.default_rng(4)
    ps, ss = [], []
    for po, pc in zip(paths, copies):
        a, b = cv2.imread(po), cv2.imread(pc)
        assert max(b.shape[:2]) == 512
        H, W = a.shape[:2]
        for _ in range(3):
            x, y, w, h = hires.rrc_box(rng, H, W)
            ra, rb = hires.render(a, (x / W, y / H, w / W, h / H)), hires.render(b, (x / W, y / H, w / W, h / H))
            assert ra.shape == rb.shape == (224, 224, 3)
            ps.append(peak_signal_noise_ratio(ra, rb, data_range=255))
            ss.append(structural_similarity(ra, rb, channel_axis=2, data_range=255))
    assert q["psnr_median_db"] == pytest.approx(float(np.median(ps)), abs=1e-6)
    assert q["ssim_median"] == pytest.approx(float(np.median(ss)), abs=1e-9)
    assert 15 < q["psnr_median_db"] < 99 and 0 < q["ssim_median"] < 1


def test_hires_forms_cli_end_to_end(tmp_path, monkeypatch, capsys):
    """--hires-forms builds the copies once, measures fastq on every form in one run and
    reports the per-form single-thread profile (DALI CPU is not needed for the path)."""
    import json
    from fastq.cli import main
    real = testdata.make_hires_dataset

    def small(out_dir, n, **kw):
        return real(out_dir, n, min_width=300, max_width=420, **kw)

    monkeypatch.setattr(testdata, "make_hires_dataset", small)
    out = tmp_path / "r.json"
    rc = main(["bench", "--task", "hires", "--hires-forms", "prepared,max128", "--images", "64", "--quick",
               "--peers", "fastq", "--data-dir", str(tmp_path), "--no-progress", "--json", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["forms"] == ["original", "prepared", "max128"]
    assert set(res["peers"]) == {"fastq@original", "fastq@prepared", "fastq@max128"}
    assert os.path.isdir(tmp_path / "hires_64_seed0_prepared") and os.path.isdir(tmp_path / "hires_64_seed0_max128")
    st = res["single_thread"]
    assert st["prepared"]["segment_decodes"] > 0 and st["original"]["segment_decodes"] == 0
    # the segment path reads fewer entropy bytes than the plain path, never fewer than the box needs
    p, o = st["prepared"]["entropy_decoded"], st["original"]["entropy_decoded"]
    assert p["restart_tiled_files"] == 64 and o["restart_tiled_files"] == 0
    assert st["prepared"]["entropy_box"]["mean_entropy_bytes_decoded"] <= p["mean_entropy_bytes_decoded"]
    assert p["decoded_fraction_of_scan"] < o["decoded_fraction_of_scan"]
    off = st["prepared, segments off"]  # the same files through the plain path: whole rows
    assert off["segment_decodes"] == 0
    assert off["entropy_decoded"]["decoded_fraction_of_scan"] > p["decoded_fraction_of_scan"]
    assert 0 < res["quality"]["max128"]["ssim_median"] < 1
    text = capsys.readouterr().out
    assert "single thread" in text and "quality of the max128 copy" in text
    assert main(["bench", "--task", "reference", "--hires-forms", "prepared", "--quick", "--peers", "fastq",
                 "--data-dir", str(tmp_path), "--no-progress"]) == 2
    assert "--hires-forms needs --task hires" in capsys.readouterr().err
