"""The build: missing native dependencies are named, and the sdist is complete (it
builds and installs on its own, with the system libraries)."""
import os
import re
import subprocess
import sys
import tarfile

import pytest

pytestmark = pytest.mark.wheel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _setup(args, env_extra, tmp_path):
    env = dict(os.environ)
    env.pop("FASTQ_VENDORED_PREFIX", None)
    env.update(env_extra)
    return subprocess.run([sys.executable, "setup.py"] + args + ["-b", str(tmp_path / "b"), "-t", str(tmp_path / "t")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_missing_opencv_headers_name_the_debian_packages(tmp_path):
    res = _setup(["build_ext"], {"FASTQ_OPENCV_INCLUDE": str(tmp_path / "no-opencv-here")}, tmp_path)
    assert res.returncode != 0
    assert "missing native build dependencies" in res.stderr
    assert "opencv2/core.hpp" in res.stderr
    assert "apt-get install -y libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev" in res.stderr
    assert "scripts/build_deps.sh" in res.stderr  # the other way: the vendored static libraries
    assert "turbojpeg" not in res.stderr  # nothing calls the TurboJPEG API
    assert "Traceback" not in res.stderr


def test_incomplete_vendored_prefix_names_what_is_missing(tmp_path):
    prefix = tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "libjpeg.a").write_bytes(b"!<arch>\n")
    res = _setup(["build_ext"], {"FASTQ_VENDORED_PREFIX": str(prefix)}, tmp_path)
    assert res.returncode != 0
    assert f"FASTQ_VENDORED_PREFIX={prefix} is missing" in res.stderr
    for what in ("libopencv_imgcodecs.a", "libpng16.a", "libwebp.a", "libz.a", "opencv2/imgcodecs.hpp", ".complete"):
        assert what in res.stderr, what
    assert "libjpeg.a" not in res.stderr.split("is missing:")[1].split("\n")[0]
    assert "bash scripts/build_deps.sh" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    out = tmp_path_factory.mktemp("sdist")
    res = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out), ROOT],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    (path,) = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".tar.gz")]
    # the distribution is fastq-loader (issue 29; "fastq" on PyPI is another project)
    assert re.fullmatch(r"fastq_loader-\d+\.\d+\.\d+\.tar\.gz", os.path.basename(path)), path
    return path


def test_sdist_holds_every_source_and_no_generated_file(sdist):
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    tracked = subprocess.run(["git", "ls-files", "csrc", "fastq"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    need = {f for f in tracked if not f.startswith("csrc/tests/")}
    assert {"csrc/image/internal/fq_image_internal.h", "csrc/image/api/fq_image_spec.cpp", "csrc/core/fq_rng.h",
            "fastq/_native/includes/fq_common.pxd", "fastq/ops/_base.py"} <= need
    assert need <= names, sorted(need - names)
    for f in ("setup.py", "pyproject.toml", "MANIFEST.in", "LICENSE", "THIRD_PARTY_NOTICES.md", "README.md",
              "scripts/build_deps.sh"):
        assert f in names, f
    generated = [n for n in names if n.endswith((".so", ".o", ".a")) or
                 (n.startswith("fastq/_native/_") and n.endswith((".c", ".cpp")))]
    assert not generated, generated


def test_sdist_without_native_libraries_fails_naming_them(sdist, tmp_path):
    env = dict(os.environ, FASTQ_VENDORED_PREFIX=str(tmp_path / "nowhere"))
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                          "--disable-pip-version-check", "-w", str(tmp_path / "w"), sdist],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "is missing: " in out and "libopencv_imgcodecs.a" in out and "scripts/build_deps.sh" in out, out[-3000:]


@pytest.mark.slow
def test_sdist_builds_and_installs_with_the_system_libraries(sdist, tmp_path):
    env = dict(os.environ)
    env.pop("FASTQ_VENDORED_PREFIX", None)
    target = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                          "--disable-pip-version-check", "--target", str(target), sdist],
                         env=env, capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    dist_info = [d for d in os.listdir(target) if d.endswith(".dist-info")]
    assert len(dist_info) == 1 and dist_info[0].startswith("fastq_loader-"), dist_info
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import numpy as np, cv2, fastq\n"
        "from fastq import ops\n"
        "assert fastq.__file__.startswith(sys.argv[1]), fastq.__file__\n"
        "img = (np.arange(50 * 60 * 3) % 251).astype(np.uint8).reshape(50, 60, 3)\n"
        "path = sys.argv[1] + '/x.png'\n"
        "assert cv2.imwrite(path, img)\n"
        "with fastq.Pipeline(fastq.sources.Files([path] * 2), ops=[ops.CenterCrop(32)], dtype='uint8',\n"
        "                    batch_size=2) as p:\n"
        "    (b,) = next(iter(p))\n"
        "ref = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)[9:41, 14:46]\n"
        "assert (b[0] == ref).all() and (b[1] == ref).all()\n"
    )
    res = subprocess.run([sys.executable, "-c", code, str(target)], cwd=str(tmp_path), env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
