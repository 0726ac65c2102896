"""Every script under benchmarks/ runs, on a tiny input (a few images, one repeat),
so that none can rot unnoticed again (bench_sources.py and bench_prepare.py once
died at import).  Each runs in its own process from the checkout, as a user runs
it; the assertions check that it got to its summary, not its figures.  The
examples are run by tests/cli/test_examples.py."""
import glob
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.slow

# script -> the test below that runs it
SCRIPTS = {
    "bench_core.py": "test_bench_core",
    "bench_dense.py": "test_bench_dense",
    "bench_feed.py": "test_bench_feed",
    "bench_gpu.py": "test_bench_gpu_without_a_gpu_says_so_and_exits_0",
    "bench_hires.py": "test_bench_hires",
    "bench_image_single.py": "test_bench_image_single",
    "bench_images.py": "test_bench_images",
    "bench_instance_masks.py": "test_bench_instance_masks",
    "bench_mask_sampling.py": "test_bench_mask_sampling",
    "bench_migrate_keras.py": "test_bench_migrate_keras",
    "bench_migrate_torch.py": "test_bench_migrate_torch",
    "bench_first_epoch.py": "test_bench_first_epoch",
    "bench_prepare.py": "test_bench_prepare",
    "bench_remote.py": "test_bench_remote",
    "bench_object_cpu.py": "test_bench_object_cpu",
    "bench_remote_cpu.py": "test_bench_remote_cpu",
    "bench_pyfunc.py": "test_bench_pyfunc",
    "bench_sources.py": "test_bench_sources",
    "bench_tf.py": "test_bench_tf",
    "bench_tf_kernel.py": "test_bench_tf_kernel",
    "bench_tp_ops.py": "test_bench_tp_ops",
    "huffman_floor.c": "test_huffman_floor",
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("bench_data"))


def run(script, *args, tmp, extra_env=None, timeout=600):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TMPDIR=str(tmp), CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra_env or {})
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), *args], capture_output=True,
                       text=True, timeout=timeout, env=env, cwd=str(tmp))
    assert r.returncode == 0, f"{script} exit {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def test_every_script_and_example_is_run_by_a_test():
    scripts = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "benchmarks", "[!_]*.py"))
                     + glob.glob(os.path.join(ROOT, "benchmarks", "*.c")))
    assert scripts == sorted(SCRIPTS), "a benchmark script without a test here (add it to SCRIPTS)"
    for name in SCRIPTS.values():
        assert callable(globals().get(name)), name
    with open(os.path.join(ROOT, "tests", "cli", "test_examples.py"), encoding="utf-8") as f:
        runs = f.read()
    for p in glob.glob(os.path.join(ROOT, "examples", "*.py")):
        assert f'"examples/{os.path.basename(p)}"' in runs, f"{p} is not run by tests/cli/test_examples.py"


def test_bench_core(tmp_path):
    out = run("bench_core.py", "--repeats", "1", "--batches", "20", "--json", str(tmp_path / "c.json"), tmp=tmp_path)
    assert "native C producers -> C consumer" in out
    assert json.loads((tmp_path / "c.json").read_text())


def test_bench_mask_sampling(tmp_path):
    out = run("bench_mask_sampling.py", "--images", "8", "--rounds", "1", "--epochs", "1", "--json",
              str(tmp_path / "m.json"), tmp=tmp_path)
    assert "center" in out and "legacy" in out and "vs legacy" in out
    res = json.loads((tmp_path / "m.json").read_text())
    assert set(res["medians"]) == {"center", "legacy"} and res["medians"]["legacy"]["images_per_s_ratio"] == 1.0


def test_bench_image_single(tmp_path):
    out = run("bench_image_single.py", "--images", "6", "--runs", "1", tmp=tmp_path)
    assert "dct_scaling=True" in out and "dct_scaling=False" in out and "peer python+cv2 loop" in out


def test_bench_images(tmp_path, data_dir):
    out = run("bench_images.py", "--images", "64", "--repeats", "1", "--peers", "fastq,pyloop", "--retry-busy", "0",
              "--profile", "--profile-images", "8", "--data-dir", data_dir, "--json", str(tmp_path / "r.json"),
              tmp=tmp_path)
    res = json.loads((tmp_path / "r.json").read_text())
    assert not res["failed"], res["failed"]
    assert set(res["peers"]) == {"fastq", "pyloop"} and res["task"]["name"] == "reference"
    assert res["profile"]["images"] == 8 and "per-stage profile" in out
    assert res["profile"]["entropy"]["files"] == 8 and "entropy-coded bytes decoded per image" in out


def test_bench_hires(tmp_path):
    out = run("bench_hires.py", "--images", "3", "--passes", "1", "--crops", "2", "--min-width", "300",
              "--max-width", "400", "--max-side", "128", "--json", str(tmp_path / "h.json"), tmp=tmp_path)
    res = json.loads((tmp_path / "h.json").read_text())["sets"]
    assert set(res) == {"original", "lossless", "max-side 128", "lossless, segment decode off"}, out
    assert res["max-side 128"]["kB_per_image"] < res["original"]["kB_per_image"]
    # restart segments: the crop reads fewer entropy-coded bytes than the scan down to its bottom row
    assert res["lossless"]["entropy_kB_read"] < res["original"]["entropy_kB_read"]
    assert 10 < res["max-side 128"]["psnr_median_db"] < 100 and res["max-side 128"]["upsampled_share"] > 0
    assert 0 < res["max-side 128"]["ssim_p5"] <= res["max-side 128"]["ssim_median"] < 1


def test_bench_prepare(tmp_path, data_dir):
    out = run("bench_prepare.py", "--images", "8", "--batch-size", "4", "--repeats", "1", "--passes", "1",
              "--single-images", "4", "--intervals", "4", "--peers", "orig,prep", "--data-dir", data_dir,
              "--json", str(tmp_path / "p.json"), tmp=tmp_path)
    res = json.loads((tmp_path / "p.json").read_text())
    assert res["identity"]["samples_identical"] == 8 and res["identity"]["batches_identical"] == 2
    assert set(res["end_to_end_images_per_s"]) == {"orig", "prep"}, out


def test_bench_object_cpu(tmp_path, data_dir):
    """Every client style fetches every object whole (the script exits non-zero otherwise) and
    reports its CPU per object."""
    pytest.importorskip("obstore", reason="bench_object_cpu.py needs obstore (requirements-dev.txt)")
    out = run("bench_object_cpu.py", "--images", "64", "--objects", "96", "--in-flight", "8", "--latency", "0",
              "--rounds", "1", "--data-dir", data_dir, tmp=tmp_path)
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("client "))
    rows = {ln[:44].strip(): ln[44:].split() for ln in lines[head + 1:] if ln.strip()}
    assert {"asyncio, task per object (fastq before)", "blocking get + bytes, threads"} <= set(rows), out
    try:
        import uvloop  # noqa: F401
        assert "uvloop, fastq native HTTP client" in rows, out
    except ImportError:
        pass
    assert all(float(v[0]) > 0 and float(v[1]) > 0 for v in rows.values()), out


def test_bench_remote_cpu(tmp_path, data_dir):
    """Every row runs and reports CPU per image, its ratio to local Files (1 for local) and
    images per second; the gather rows, the nginx (http and https) and moto rows and the byte caps are taken."""
    pytest.importorskip("obstore", reason="bench_remote_cpu.py needs obstore (requirements-dev.txt)")
    out = run("bench_remote_cpu.py", "--images", "64", "--rounds", "1", "--latency", "0", "--gather", "0,0.005",
              "--obstore", "--nginx", "--https", "--moto", "--max-bytes", "4", "--data-dir", data_dir, tmp=tmp_path)
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("row "))
    rows = {ln[:40].strip(): ln[40:].split() for ln in lines[head + 1:] if ln.strip()}
    assert set(rows) == {"local Files", "s3:// fastq's client, gather 0 ms", "s3:// fastq's client, gather 5 ms",
                         "s3:// obstore", "http:// nginx, fastq's client", "https:// nginx, fastq's client",
                         "https:// nginx, obstore", "s3:// moto, fastq's client"}, out
    assert float(rows["local Files"][1]) == 1.0 and "'max_bytes': 4194304" in out, out
    assert all(float(v[0]) > 0 and float(v[2]) > 0 for v in rows.values()), out


def test_bench_remote(tmp_path, data_dir):
    """--quick --json: the local rows, the peers streaming from the server, its raw rate, and
    fastq's own remote rows, measured or (until this build has them) reported as missing."""
    pytest.importorskip("obstore", reason="bench_remote.py needs obstore (requirements-dev.txt)")
    out = run("bench_remote.py", "--help", tmp=tmp_path)
    assert out.startswith("usage: bench_remote.py") and "--quick" in out
    out = run("bench_remote.py", "--quick", "--data-dir", data_dir, "--json", str(tmp_path / "r.json"), tmp=tmp_path)
    res = json.loads((tmp_path / "r.json").read_text())
    rows, skipped = res["rows"], res["skipped"]
    assert res["images"] == 128 and res["latencies_ms"] == [20] and res["rounds"] == 1
    assert {"local Files", "local WebDataset", "local TFRecord", "urllib x32 -> Stream 20 ms"} <= set(rows), out
    assert all(r["images_per_s"] > 0 for r in rows.values())
    assert 0 < rows["urllib x32 -> Stream 20 ms"]["ratio_local"] and res["raw_rate"]["20"]["best"] > 0
    for form in ("Files", "WebDataset", "TFRecord"):
        name = f"fastq {form} s3 20 ms"
        assert name in rows or skipped[name].startswith("fastq remote sources not available in this build"), out
    assert "fastq remote sources not available in this build" in out or "fastq Files s3 20 ms" in rows
    assert "remote/min(local,raw)" in out
    # servers fastq did not write: nginx (http, https) and moto, measured, or skipped saying why
    for label in ("nginx http", "nginx https", "moto s3"):
        for form in ("Files", "WebDataset"):
            name = f"fastq {form} {label}"
            assert name in rows or skipped[name], out
            if name in rows:
                r = rows[name]
                assert r["server"] == label and r["max_gap_s"] > 0 and r["cpu_us_per_object"] > 0, r
                assert (r["requests_per_object"] >= 1) == (form == "Files"), r
    assert all(r["cpu_us_per_object"] > 0 and r["cpu_ratio_local_files"] > 0 for r in rows.values())
    assert rows["local Files"]["requests_per_object"] is None and "CPU us/obj" in out
    # the same benchmark behind `fastq bench --task remote`
    r = subprocess.run([sys.executable, "-m", "fastq", "bench", "--task", "remote", "--quick", "--no-progress",
                        "--data-dir", data_dir, "--json", str(tmp_path / "c.json")], capture_output=True, text=True,
                       timeout=600, cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert set(json.loads((tmp_path / "c.json").read_text())["rows"]) == set(rows)


@pytest.mark.tf
def test_bench_sources(tmp_path, data_dir):
    out = run("bench_sources.py", "--images", "8", "--shards", "2", "--repeats", "1", "--batch-size", "4",
              "--workers", "1", "--data-dir", data_dir, tmp=tmp_path)
    assert "fastq TFRecord / tf.data TFRecord" in out and "fastq Folder / fastq Files" in out
    out = run("bench_sources.py", "--latency", "--images", "8", "--repeats", "1", "--batch-size", "4",
              "--workers", "1", "--data-dir", data_dir, tmp=tmp_path)
    assert "storage latency (sleep per file read) vs io_threads" in out


@pytest.mark.tf
def test_bench_tf(tmp_path):
    out = run("bench_tf.py", "--images", "8", "--batch-size", "4", "--repeats", "1", "--graph", "--fit", "--handoff",
              tmp=tmp_path)
    assert "native tf.data / direct = " in out and "from_generator tf.function" in out
    assert "fit: native / tf.data native ops = " in out and "handoff per epoch (2 batches): direct" in out


@pytest.mark.tf
def test_bench_gpu_without_a_gpu_says_so_and_exits_0(tmp_path):
    out = run("bench_gpu.py", "--images", "8", "--batch-size", "4", "--copies", "1", "--repeats", "1", tmp=tmp_path)
    assert out.strip().splitlines()[-1] == \
        "no GPU: skipped (TensorFlow sees no GPU; tf.config.list_physical_devices('GPU') is empty)"


@pytest.mark.tf
def test_bench_tf_kernel(tmp_path):
    out = run("bench_tf_kernel.py", "--tiny", "--json", str(tmp_path / "k.json"), tmp=tmp_path)
    res = json.loads((tmp_path / "k.json").read_text())
    assert res["local"]["cpu_s_per_image_uint8"] > 0 and res["model_8gpu_3000"]["cpu_cores"] > 0, out[-2000:]
    assert set(res["local"]["images_per_s"]) == {"kernel", "kernel_files", "kernel_uint8", "fastq_tf", "tfdata"}
    assert res["local"]["kernel_files_vs_fastq_tf"] > 0


def test_bench_pyfunc(tmp_path):
    out = run("bench_pyfunc.py", "--images", "16", "--size", "64", "--workers", "2", "--batch", "8", "--repeats", "1",
              "--json", str(tmp_path / "p.json"), tmp=tmp_path)
    assert "pyfunc overhead:" in out
    res = json.loads((tmp_path / "p.json").read_text())
    assert set(res["median"]) == {"chain", "chain + PyFunc(identity)", "chain + PyFunc(identity) x4"}


def test_bench_dense(tmp_path):
    from fastq.bench.runner import default_peers
    out = run("bench_dense.py", "--images", "8", "--quick", "--json", str(tmp_path / "d.json"), tmp=tmp_path)
    d = json.load(open(tmp_path / "d.json"))
    res = d["results"]
    assert set(res) == {"detection", "segmentation"} and d["args"]["images"] == 8
    for task, r in res.items():
        assert r["task"]["name"] == task and r["task"]["images"] == 8 and r["task"]["rounds"] == 1, r["task"]
        assert not r["failed"], r["failed"]
        assert r["peers"]["fastq"]["images_per_s"] > 0 and r["machine"]["fastq_workers"] == min(2, os.cpu_count())
        assert r["peers"]["pyloop"]["images_per_epoch"] == 8  # cv2: always installed here
        # every other peer of the task either ran or says why not
        for p in default_peers(task):
            assert p in r["peers"] or p in r["not_installed"], (task, p)
        assert f"task {task}: " in out
    assert res["detection"]["peers"]["fastq"]["info"]["options"] == {"pad": "batch", "pad_multiple": 32}


def test_bench_feed(tmp_path, data_dir):
    out = run("bench_feed.py", "--images", "64", "--batch", "8", "--rounds", "1", "--feeders", "fastq,fastq_normal",
              "--settings", "slow=1:20,launch=3:2", "--reference-check", "--data-dir", data_dir,
              "--json", str(tmp_path / "f.json"), tmp=tmp_path)
    res = json.loads((tmp_path / "f.json").read_text())
    assert res["order"] == ["fastq", "fastq_normal"] and not res["failed"], res["failed"]
    assert res["task"]["batch"] == 8 and res["task"]["skip"] == 4 and res["task"]["timed_batches"] == 4
    for f in res["feeders"].values():
        assert set(f["settings"]) == {"slow", "launch"}
        for m in f["settings"].values():
            assert m["images_per_s"] > 0 and m["ideal"] > 0 and m["ratio"] == pytest.approx(m["ratio_runs"][0])
    # the trainer alone: D = 20 ms per batch of 8 when its launches are short
    assert res["feeders"]["fastq"]["settings"]["slow"]["trainer_alone"] == pytest.approx(8 / 0.02, rel=1e-6)
    assert res["feeders"]["fastq"]["info"]["scheduling"]["priority"] == "background"
    assert res["feeders"]["fastq_normal"]["info"]["scheduling"]["priority"] == "normal"
    ref = res["reference_check"]
    assert set(ref["result"]["peers"]) == {"fastq", "fastq_normal"} and ref["background_over_normal"] > 0
    assert "slow: C 1 ms (took " in out and "background / normal" in out


def test_bench_instance_masks(tmp_path):
    out = run("bench_instance_masks.py", "--images", "4", "--repeats", "1", "--width", "96", "--height", "64",
              "--short", "48", "--max-size", "96", "--batch", "2", "--json", str(tmp_path / "i.json"), tmp=tmp_path)
    res = json.load(open(tmp_path / "i.json"))["results"]
    assert {"fastq boxes", "fastq boxes + instance masks", "fastq boxes + instance masks 28x28"} <= set(res), res
    assert all(r["wall_ms_per_image"] > 0 for r in res.values()) and "4 images 96x64" in out


def test_bench_tp_ops(tmp_path):
    out = run("bench_tp_ops.py", "--images", "6", "--runs", "1", tmp=tmp_path)
    assert "TensorpackColor (224x224)" in out and "scalar path" in out and "whole chain (dct_scaling=False)" in out


def test_bench_migrate_torch(tmp_path):
    """the torchvision and timm rows (fastq.bench.migrate) on a few photos, and the PSNR table"""
    out = run("bench_migrate_torch.py", "--quick", "--n", "24", "--epochs", "1", "--batch-size", "8",
              "--root", str(tmp_path / "tree"), tmp=tmp_path)
    assert "torchvision" in out and "timm" in out and "ratio" in out, out


def test_bench_migrate_keras(tmp_path):
    out = run("bench_migrate_keras.py", "--quick", "--images", "24", "--batch-size", "8", tmp=tmp_path)
    assert "keras" in out.lower() and "ratio" in out, out


def test_bench_first_epoch(tmp_path, data_dir):
    pytest.importorskip("obstore", reason="bench_first_epoch.py needs obstore (requirements-dev.txt)")
    out = run("bench_first_epoch.py", "--images", "160", "--shards", "2", "--rounds", "1", "--latency", "0",
              "--data-dir", data_dir, tmp=tmp_path)
    assert "spool" in out.lower(), out


def test_huffman_floor(tmp_path):
    """the C tool builds warning-free with the command its header gives and reports its four rows"""
    from fastq.bench.testdata import make_jpeg_dataset

    exe = str(tmp_path / "huffman_floor")
    b = subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", os.path.join(ROOT, "benchmarks", "huffman_floor.c"),
                        "-ljpeg", "-o", exe], capture_output=True, text=True)
    assert b.returncode == 0, b.stderr
    paths = make_jpeg_dataset(str(tmp_path / "j"), 3, seed=1)
    r = subprocess.run([exe, *paths], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("3 files")
    for name in ("Huffman only", "decode 8/8", "decode 2/8", "decode 1/8"):
        assert name in r.stdout, r.stdout
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not a jpeg")
    r = subprocess.run([exe, str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0


def test_readme_results_table_from_one_sitting():
    """scripts/readme_results.py: --help, and its table from the JSON shapes `fastq bench` writes
    (a peer that did not run is named as such, never left out)."""
    import importlib.util
    import subprocess
    import sys
    path = os.path.join(ROOT, "scripts", "readme_results.py")
    out = subprocess.run([sys.executable, path, "--help"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("usage: readme_results.py") and "--quick" in out
    spec = importlib.util.spec_from_file_location("readme_results", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def peers(**kw):
        return {k: {"images_per_s": v[0], "fastq_over_peer": v[1], "cpu_us_per_image": v[2]} for k, v in kw.items()}
    ref = {"peers": peers(fastq=(3000, None, 600), tfdata=(1500, 2.0, 1200), tensorpack=(1200, 2.5, 900),
                          pyloop=(600, 5.0, 800)), "not_installed": ["dali"], "failed": {}}
    ra = {"peers": peers(fastq=(2000, None, 900), dali=(800, 2.5, 1000)), "not_installed": [], "failed": {"torch": "x"}}
    fb = {"peers": peers(fastq=(2000, None, 900), tensorpack=(500, 4.0, 1000)), "not_installed": [], "failed": {}}
    mig = {"rows": {"torchvision reference preset": {"ratio": 3.9}, "keras flip+rotation+zoom": {"ratio": 4.8}}}
    rows = dict(mod.table(ref, ra, fb, mig))
    assert rows["reference task, 2 workers: fastq 3000 images/s, against tf.data native (AUTOTUNE)"] == "2.00x"
    assert rows["reference task against NVIDIA DALI's CPU pipeline"] == "not installed here"
    assert rows["CPU time per image: fastq 600 µs, tf.data 1200 µs"] == "2.00x less"
    assert rows["RandAugment against DALI CPU / torchvision `DataLoader`"] == "2.50x / failed in this run"
    assert rows["your torchvision / timm / Keras recipe, translated, against its own loader"] == \
        "3.90x / not measured / 4.80x"
