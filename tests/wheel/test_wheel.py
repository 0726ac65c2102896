"""The compiled wheel as users get it.

The wheel is the one `bash scripts/build_wheel.sh` leaves in dist/ (FASTQ_WHEEL names it;
scripts/test.sh builds it first), or the test builds it.  It is installed into a fresh
venv that holds numpy and nothing else, and checked there:

* a real pipeline (decode + crop/resize/flip + fused normalize) over every format the
  wheel decodes (JPEG, PNG, WebP, BMP, PNM; RGB, gray and RGBA sources; RGB and gray
  output) matches a replay with pip's cv2 and numpy in this (outer) process;
* `ldd` of every installed extension resolves no OpenCV, libjpeg, libpng, libwebp or
  zlib from the system, and needs nothing outside the manylinux policy;
* each extension exports only its PyInit_* symbol (and fastq._native._image the table fastq_capi_v1,
  fastq._native._core the table fastq_ring_capi_v1);
* `auditwheel show` reports the manylinux tag in the file name;
* fastq, pip's cv2 and TensorFlow load into one process and each runs.
"""
import os
import pickle
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

from helpers.image_ref import cv2, finish, replay

from fastq import ops

pytestmark = [pytest.mark.wheel, pytest.mark.slow]  # builds a wheel (minutes)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERSION = re.search(r'^version = "([^"]+)"', open(os.path.join(ROOT, "pyproject.toml")).read(), re.M).group(1)
PY_TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}"
# manylinux_2_YY_x86_64, or (glibc 2.17, FASTQ_TOOLCHAIN=zig) with its legacy alias:
# manylinux2014_x86_64.manylinux_2_17_x86_64.  The distribution is fastq-loader (issue 29:
# "fastq" on PyPI is another project), the package inside it fastq.
WHEEL_RE = re.compile(rf"^fastq_loader-{re.escape(VERSION)}-{PY_TAG}-{PY_TAG}-(?:manylinux2014_x86_64\.)?"
                      r"(manylinux_2_(\d+)_x86_64)(?:\.manylinux2014_x86_64)?\.whl$")
# What an extension may load: glibc's libraries, libstdc++ and libgcc (manylinux policy).
ALLOWED_NEEDED = re.compile(r"^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so")
VENDORED_RE = re.compile(r"opencv|jpeg|png|webp|libz\.|tiff|gdal|openexr|jasper|openjp", re.I)
CHAIN = [ops.RandomResizedCrop(40), ops.HorizontalFlip(), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]
# one level of an 8-bit image after Normalize (the smallest std is 0.224)
ONE_LEVEL = 1.0 / 255 / 0.224 + 1e-5


def clean_env(**extra):
    """This environment without PYTHONPATH: the checkout (with its own fastq and
    fastq.egg-info) must not be visible to the venv's pip or Python."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(extra)
    return env


def run(cmd, **kw):
    kw.setdefault("timeout", 900)
    kw.setdefault("env", clean_env())
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert res.returncode == 0, f"{cmd} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout


@pytest.fixture(scope="module")
def wheel():
    path = os.environ.get("FASTQ_WHEEL")
    if not path:
        out = run(["bash", "scripts/build_wheel.sh"], cwd=ROOT, timeout=3600)
        path = out.strip().splitlines()[-1]
    assert os.path.isfile(path), path
    return os.path.abspath(path)


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh venv with numpy (the version this interpreter has) and the wheel."""
    d = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", str(d)])
    py = str(d / "bin" / "python")
    run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", f"numpy=={np.__version__}", wheel])
    site = run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    return py, site


def extensions(site):
    d = os.path.join(site, "fastq", "_native")
    sos = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".so"))
    assert {os.path.basename(s).split(".")[0] for s in sos} >= {"_core", "_image", "_cuda"}, sos
    return sos


def test_test_only_module_builds_against_the_installed_wheel(venv, tmp_path):
    """The wheel has no fastq._native._testing; scripts/build_testing_module.sh (the
    cibuildwheel before-test step) builds it next to the installed package, and
    its native pattern task runs through the wheel's ring and pool: the
    test-only module and the shipped one agree on the Ring layout."""
    py, site = venv
    code = "from fastq._native import _testing"
    res = subprocess.run([py, "-c", code], capture_output=True, text=True, env=clean_env(), cwd=str(tmp_path))
    assert res.returncode != 0 and "_testing" in res.stderr, res.stderr
    # a private copy of the install, so that the other tests keep seeing the wheel alone
    site2 = tmp_path / "site"
    shutil.copytree(os.path.join(site, "fastq"), site2 / "fastq")
    run(["bash", "scripts/build_testing_module.sh", str(site2)], cwd=ROOT)
    script = textwrap.dedent("""
        import sys; sys.path.insert(0, sys.argv[1])
        import numpy as np
        from fastq._native import _core, _testing
        assert _core.__file__.startswith(sys.argv[1]), _core.__file__
        ring = _core.Ring(3, 4, [np.uint8, np.int64], [(40,), ()])
        task = _testing.PatternTask(ring, seed=5)
        ring.begin_run(False)
        ring.set_end(37)
        run = _core.NativeRun(ring, task, 2, 37)
        batches, rows, bad, _ = task.drain(ring)
        run.join()
        assert (batches, rows, bad) == (10, 37, 0), (batches, rows, bad)
        assert _testing.block_address(ring, 0, 0) == _testing.arena_address(ring)
        print("OK")
    """)
    assert run([py, "-c", script, str(site2)], cwd=str(tmp_path)).strip() == "OK"


def test_the_distribution_is_fastq_loader_with_the_fastq_package_and_command(venv):
    py, site = venv
    code = ("import importlib.metadata as md, fastq; d = md.distribution('fastq-loader'); "
            "print(d.version, fastq.__version__, sorted(e.name for e in d.entry_points), "
            "md.packages_distributions()['fastq'])")
    out = run([py, "-I", "-c", code]).split(None, 2)
    assert out[0] == VERSION == out[1] and out[2].strip() == "['fastq'] ['fastq-loader']", out
    cli = os.path.join(os.path.dirname(py), "fastq")
    assert "usage: fastq" in run([cli, "--help"])


def test_every_script_answers_help_from_a_copy_with_the_wheel(venv, tmp_path):
    """benchmarks/ and examples/ copied outside the checkout, run by the venv's Python
    (numpy and the wheel, no framework): each answers --help.  And from a copy of the
    checkout whose fastq is not built, a benchmark runs on the wheel's fastq and says so
    (issue 29)."""
    py, site = venv
    for d in ("benchmarks", "examples"):
        shutil.copytree(os.path.join(ROOT, d), tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    scripts = sorted(f"{d}/{f}" for d in ("benchmarks", "examples") for f in os.listdir(tmp_path / d)
                     if f.endswith(".py") and not f.startswith("_"))
    assert len(scripts) >= 19, scripts
    for script in scripts:
        out = run([py, script, "--help"], cwd=str(tmp_path))
        assert out.startswith("usage: " + os.path.basename(script)), (script, out[:300])
    unbuilt = tmp_path / "checkout"
    shutil.copytree(os.path.join(ROOT, "fastq"), unbuilt / "fastq", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copytree(tmp_path / "benchmarks", unbuilt / "benchmarks")
    res = subprocess.run([py, "benchmarks/bench_image_single.py", "--help"], cwd=str(unbuilt), capture_output=True,
                         text=True, env=clean_env(PYTHONPATH=str(unbuilt)), timeout=300)
    assert res.returncode == 0 and res.stdout.startswith("usage: bench_image_single.py"), res.stderr
    assert f"not built; using the installed fastq ({os.path.join(site, 'fastq')})" in res.stderr, res.stderr


def test_wheel_name_tag_and_auditwheel(wheel):
    m = WHEEL_RE.match(os.path.basename(wheel))
    assert m, os.path.basename(wheel)
    out = run([sys.executable, "-m", "auditwheel", "show", wheel])
    flat = " ".join(out.split())
    assert f'consistent with the following platform tag: "{m.group(1)}"' in flat, out
    assert "following external shared libraries are required" not in flat, out


def test_wheel_contents_are_clean(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert not [n for n in names if n.endswith((".cpp", ".c", ".o", ".a"))], names
        assert not [n for n in names if "_testing" in n or "testtask" in n], "test-only code in the wheel"
        lic = {n.split("/licenses/", 1)[1] for n in names if "/licenses/" in n}
        assert {"LICENSE", "THIRD_PARTY_NOTICES.md"} <= lic, lic
        for lib in ("opencv", "libjpeg-turbo", "libpng", "libwebp", "zlib"):
            assert f"vendored/{lib}.LICENSE" in lic, (lib, lic)
        assert "Apache License" in z.read([n for n in names if n.endswith("vendored/opencv.LICENSE")][0]).decode()
        assert not [n for n in names if n.startswith("fastq.libs/")], "auditwheel grafted libraries"
        # what fastq.tf.ops compiles against the user's TensorFlow
        kernel = sorted(n[len("fastq/_tf_kernel/"):] for n in names
                        if n.startswith("fastq/_tf_kernel/") and not n.endswith("/"))
        assert kernel == ["core/fq_common.h", "core/fq_stage_times.h", "image/fq_batch_mix.h", "image/fq_batch_pad.h",
                          "image/fq_capi.h", "image/fq_image.h", "ring/fq_ring.h", "ring/fq_ring_capi.h",
                          "tf/fq_tf_dataset.cc", "tf/fq_tf_dataset.h", "tf/fq_tf_feed.cc", "tf/fq_tf_feed.h",
                          "tf/fq_tf_kernel.cc"], kernel
    assert os.path.getsize(wheel) < 12 * 2**20


def test_extensions_are_stripped_without_runpath_and_export_only_pyinit(venv):
    py, site = venv
    for so in extensions(site):
        dyn = run(["readelf", "-d", so])
        assert "RPATH" not in dyn and "RUNPATH" not in dyn, dyn
        assert ".symtab" not in run(["readelf", "-S", "-W", so]), f"{so} is not stripped"
        syms = [ln.split()[-1] for ln in run(["nm", "-D", "--defined-only", so]).splitlines() if ln.strip()]
        name = os.path.basename(so).split(".")[0]
        # fastq._native._image also exports the C API table of the TensorFlow op (csrc/image/fq_capi.h),
        # fastq._native._core the ring's (csrc/ring/fq_ring_capi.h) for the dataset op
        want = sorted([f"PyInit_{name}"] + {"_image": ["fastq_capi_v1"], "_core": ["fastq_ring_capi_v1"]}.get(name, []))
        syms = sorted(syms)
        assert syms == want, (so, syms)


def test_ldd_resolves_no_image_library_from_the_system(venv):
    py, site = venv
    for so in extensions(site):
        out = run(["ldd", so])
        assert "not found" not in out, out
        libs = [ln.split()[0] for ln in out.splitlines() if ln.strip()]
        assert not [l for l in libs if VENDORED_RE.search(l)], out
        needed = re.findall(r"\(NEEDED\).*\[(.+)\]", run(["readelf", "-d", so]))
        assert needed and all(ALLOWED_NEEDED.match(n) for n in needed), (so, needed)


def _write_images(d):
    """Every format and source colour type the wheel decodes, encoded by pip's cv2."""
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:90, 0:120]
    rgb = np.stack([(xx * 2) % 256, (yy * 3) % 256, (xx + yy) % 256], -1).astype(np.uint8)
    rgb = cv2.GaussianBlur(rgb, (0, 0), 1.5)
    rgb[::7] = rng.integers(0, 256, rgb[::7].shape, dtype=np.uint8)  # texture, not just ramps
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    bgra = np.dstack([bgr, (xx % 256).astype(np.uint8)])
    items = {
        "rgb.jpg": (bgr, [cv2.IMWRITE_JPEG_QUALITY, 92]), "gray.jpg": (gray, [cv2.IMWRITE_JPEG_QUALITY, 92]),
        "rgb.png": (bgr, []), "gray.png": (gray, []), "rgba.png": (bgra, []),
        "rgb_lossless.webp": (bgr, [cv2.IMWRITE_WEBP_QUALITY, 101]), "rgb_lossy.webp": (bgr, [cv2.IMWRITE_WEBP_QUALITY, 80]),
        "rgb.bmp": (bgr, []), "gray.bmp": (gray, []), "rgb.ppm": (bgr, []), "gray.pgm": (gray, []),
        # TIFF with each codec the wheel's libtiff has (pip's cv2 writes LZW by default)
        "rgb_lzw.tiff": (bgr, []), "gray_lzw.tif": (gray, []), "rgba_lzw.tiff": (bgra, []),
        "rgb_none.tiff": (bgr, [cv2.IMWRITE_TIFF_COMPRESSION, 1]),
        "rgb_packbits.tiff": (bgr, [cv2.IMWRITE_TIFF_COMPRESSION, 32773]),
        "rgb_deflate.tiff": (bgr, [cv2.IMWRITE_TIFF_COMPRESSION, 8]),
        "rgb_jpeg.tiff": (np.ascontiguousarray(bgr[:80, :112]), [cv2.IMWRITE_TIFF_COMPRESSION, 7]),  # libtiff: rows per strip % 8
    }
    paths = []
    for name, (img, params) in items.items():
        ok, buf = cv2.imencode(os.path.splitext(name)[1], img, params)
        assert ok, name
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(buf.tobytes())
        paths.append(p)
    return paths


PIPELINE_SCRIPT = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    import fastq
    from fastq import ops
    paths, out = sys.argv[1].split(","), sys.argv[2]
    chain = [ops.RandomResizedCrop(40), ops.HorizontalFlip(), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]
    res = {"fastq": fastq.__file__, "runs": {}}
    for channels in (3, 1):
        rows = {}
        with fastq.Pipeline(fastq.sources.Files(paths), ops=chain, batch_size=4, seed=11, shuffle=False,
                            return_index=True, dct_scaling=False, channels=channels, drop_remainder=False) as p:
            for img, idx in p:
                for row, i in zip(img, idx):
                    rows[int(i)] = (np.array(row), p.explain(0, int(i)))
        res["runs"][channels] = rows
    # a format fastq refuses (JPEG 2000) and a TIFF codec the wheel's libtiff lacks (WebP):
    # each a clear error naming the file
    for name, path in zip(("jp2", "tiff_webp"), sys.argv[3].split(",")):
        try:
            with fastq.Pipeline(fastq.sources.Files([path] * 2), ops=[ops.CenterCrop(8)], batch_size=2) as p:
                next(iter(p))
            res[name] = "decoded"
        except fastq.errors.FastqError as e:
            res[name] = (type(e).__name__, str(e))
    with open(out, "wb") as f:
        pickle.dump(res, f)
""")


def _reference(path, channels):
    raw = cv2.imdecode(np.fromfile(path, np.uint8), cv2.IMREAD_UNCHANGED)
    if channels == 1 and path.endswith(".jpg"):  # JPEG gray output is libjpeg's luma
        return cv2.imdecode(np.fromfile(path, np.uint8), cv2.IMREAD_GRAYSCALE)[:, :, None]
    if raw.ndim == 2:
        rgb = cv2.cvtColor(raw, cv2.COLOR_GRAY2RGB)
    elif raw.shape[2] == 4:
        rgb = cv2.cvtColor(raw, cv2.COLOR_BGRA2RGB)
    else:
        rgb = cv2.cvtColor(raw, cv2.COLOR_BGR2RGB)
    if channels == 1:
        return (raw if raw.ndim == 2 else cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY))[:, :, None]
    return rgb


def test_pipeline_over_every_format_in_a_fresh_venv_matches_cv2(venv, tmp_path):
    py, site = venv
    paths = _write_images(str(tmp_path))
    script = tmp_path / "pipe.py"
    script.write_text(PIPELINE_SCRIPT)
    out = tmp_path / "out.pkl"
    # -I: isolated mode, nothing from this checkout or the user's site can be imported
    probes = []
    for name, ext, params in (("x.jp2", ".jp2", []), ("webp.tiff", ".tiff", [cv2.IMWRITE_TIFF_COMPRESSION, 50001])):
        ok, buf = cv2.imencode(ext, np.random.default_rng(1).integers(0, 256, (256, 256, 3), np.uint8), params)
        assert ok, name
        (tmp_path / name).write_bytes(buf.tobytes())
        probes.append(str(tmp_path / name))
    run([py, "-I", str(script), ",".join(paths), str(out), ",".join(probes)], cwd=str(tmp_path))
    with open(out, "rb") as f:
        res = pickle.load(f)
    assert res["fastq"].startswith(site), res["fastq"]
    assert res["jp2"][0] == "UnsupportedFormatError" and "JPEG 2000" in res["jp2"][1], res["jp2"]
    assert "x.jp2" in res["jp2"][1]
    assert res["tiff_webp"][0] == "DecodeError" and "TIFF" in res["tiff_webp"][1], res["tiff_webp"]
    assert "webp.tiff" in res["tiff_webp"][1]
    for channels, rows in res["runs"].items():
        assert sorted(rows) == list(range(len(paths))), (channels, sorted(rows))
        for i, path in enumerate(paths):
            row, ex = rows[i]
            assert row.shape == (40, 40, channels), (path, row.shape)
            ref = finish(replay(_reference(path, channels), ex, CHAIN), CHAIN)
            # the gray JPEG path (libjpeg's own colour conversion) may round one level apart
            tol = ONE_LEVEL if (channels == 1 and path.endswith(".jpg")) else 1e-5
            np.testing.assert_allclose(row, ref, rtol=0, atol=tol, err_msg=f"{path}, channels={channels}")


TLS_SCRIPT = textwrap.dedent("""
    # the wheel's HTTP client over https:// (its OpenSSL loaded at run time from Python's
    # libssl) against Python's own TLS server, in a venv without obstore
    import asyncio, http.server, os, ssl, sys, threading, types
    from fastq.bench.servers import make_test_ca
    from fastq.sources import nethttp
    d = sys.argv[1]
    body = os.urandom(300000)
    with open(os.path.join(d, "obj.bin"), "wb") as f:
        f.write(body)
    ca = make_test_ca(os.path.join(d, "ca"))
    handler = type("H", (http.server.SimpleHTTPRequestHandler,), {"protocol_version": "HTTP/1.1",
                   "log_message": lambda *a: None})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=d))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ca["cert"], ca["key"])
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print("openssl", nethttp.tls_version())
    target, why = nethttp.native_target(f"https://localhost:{httpd.server_address[1]}", {},
                                        {"root_certificate": open(ca["ca"]).read()})
    assert target is not None, why
    opts = types.SimpleNamespace(max_in_flight=4, connect_timeout_s=5.0, timeout_s=10.0)

    async def get():
        try:
            b, _, _ = await nethttp.get(target, types.SimpleNamespace(key="obj.bin"), None, None, None, opts,
                                        lambda m, t, s: RuntimeError(m))
            return bytes(b)
        finally:
            nethttp.close_loop(asyncio.get_running_loop())
    assert asyncio.run(get()) == body
    print("https ok")
""")


def test_https_through_the_wheels_client(venv, tmp_path):
    """The wheel links no OpenSSL (test_ldd...): its client loads Python's libssl at run
    time and reads an object over https:// bit for bit, in a venv without obstore."""
    py, site = venv
    script = tmp_path / "tls.py"
    script.write_text(TLS_SCRIPT)
    out = run([py, "-I", str(script), str(tmp_path)], cwd=str(tmp_path))
    assert "https ok" in out and "openssl OpenSSL" in out, out


COEXIST_SCRIPT = textwrap.dedent("""
    import os, sys
    import numpy as np
    import fastq                      # the wheel's static OpenCV / libjpeg-turbo first
    from fastq import ops
    assert fastq.__file__.startswith(sys.argv[1]), fastq.__file__
    sys.path.append(sys.argv[2])      # then pip's cv2 and TensorFlow from the test environment
    import cv2
    import tensorflow as tf
    import fastq.tf
    paths = sys.argv[3].split(",")
    with fastq.Pipeline(fastq.sources.Files(paths), ops=[ops.CenterCrop(48)], dtype="uint8",
                        batch_size=len(paths), shuffle=False) as p:
        (batch,) = next(iter(p))
        for row, path in zip(batch, paths):
            ref = cv2.cvtColor(cv2.imread(path, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
            H, W = ref.shape[:2]
            y, x = int(round((H - 48) / 2)), int(round((W - 48) / 2))
            assert np.array_equal(row, ref[y:y + 48, x:x + 48]), path
        # cv2 runs its own (pip) OpenCV on fastq's output; TF consumes a fastq batch
        small = cv2.resize(np.ascontiguousarray(batch[0]), (24, 24), interpolation=cv2.INTER_AREA)
        assert small.shape == (24, 24, 3)
        total = int(tf.reduce_sum(tf.cast(tf.constant(np.array(batch)), tf.int64)))
        assert total == int(np.array(batch, np.int64).sum())
        del batch
        (tb,) = next(iter(fastq.tf.dataset(p).take(1)))
        assert tuple(tb.shape) == (len(paths), 48, 48, 3)
    print("fastq", fastq.__file__, "cv2", cv2.__version__, "tf", tf.__version__)
""")


@pytest.mark.tf
def test_fastq_cv2_and_tensorflow_share_one_process(venv, tmp_path):
    import sysconfig
    py, site = venv
    paths = [p for p in _write_images(str(tmp_path)) if p.endswith((".jpg", ".png", ".webp"))
             and "gray" not in p and "rgba" not in p]
    script = tmp_path / "coexist.py"
    script.write_text(COEXIST_SCRIPT)
    out = run([py, str(script), site, sysconfig.get_paths()["purelib"], ",".join(paths)], cwd=str(tmp_path),
              env=clean_env(TF_CPP_MIN_LOG_LEVEL="2"))
    assert "cv2 " in out and "tf " in out, out


def test_demo_runs_from_the_installed_wheel(venv, tmp_path):
    import sysconfig
    py, site = venv
    # the demo's own needs (cv2 for its Python peer, scikit-image/-learn photos) come
    # from the test environment, appended after the venv so fastq is the wheel's
    code = ("import sys, runpy; sys.path.append(sys.argv.pop(1)); import fastq; "
            f"assert fastq.__file__.startswith({site!r}), fastq.__file__; "
            "runpy.run_module('fastq.bench.demo', run_name='__main__', alter_sys=True)")
    out = run([py, "-c", code, sysconfig.get_paths()["purelib"], "--images", "48", "--epochs", "1",
               "--batch-size", "16", "--data", str(tmp_path / "demo")], cwd=str(tmp_path))
    assert "images/s" in out, out


def test_cloud_extra_reads_a_bucket_as_a_new_user_would(venv, wheel, tmp_path):
    """pip install "fastq-loader[cloud]", export the endpoint variables, pass the URL: the
    installed wheel reads s3:// from a local S3-compatible server, and its batches are the
    ones this checkout gets from the same files on disk."""
    from fastq.bench import testdata
    from fastq.bench.objserver import ObjectServer
    import fastq
    py, _site = venv
    run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{wheel}[cloud]"])
    jpegs = testdata.make_jpeg_dataset(str(tmp_path / "jpg"), 12, seed=3, min_side=48, max_side=120)
    chain = "[fastq.ops.RandomResizedCrop(32), fastq.ops.HorizontalFlip()]"
    with fastq.Pipeline(fastq.sources.Files(jpegs, list(range(12))), batch_size=4, workers=2, seed=5,
                        shuffle=True, ops=eval(chain, {"fastq": fastq})) as p:
        want = np.concatenate([np.array(b[0]) for b in p])
    objects = {f"bk/img/{os.path.basename(j)}": open(j, "rb").read() for j in jpegs}
    urls = [f"s3://bk/img/{os.path.basename(j)}" for j in jpegs]
    code = textwrap.dedent(f"""
        import sys, numpy as np, fastq
        src = fastq.sources.Files({urls!r}, list(range(12)))
        with fastq.Pipeline(src, batch_size=4, workers=2, seed=5, shuffle=True, ops={chain}) as p:
            out = np.concatenate([np.array(b[0]) for b in p])
        np.save(sys.argv[1], out)
    """)
    with ObjectServer(objects) as srv:
        run([py, "-c", code, str(tmp_path / "got.npy")], env=clean_env(**srv.env()), cwd=str(tmp_path))
    assert (np.load(tmp_path / "got.npy") == want).all()
