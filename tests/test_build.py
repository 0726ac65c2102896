"""The build: a missing native dependency is reported with the Debian packages to install."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_missing_opencv_headers_name_the_debian_packages(tmp_path):
    env = dict(os.environ, FASTQ_OPENCV_INCLUDE=str(tmp_path / "no-opencv-here"))
    res = subprocess.run([sys.executable, "setup.py", "--name"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode != 0
    assert "missing native build dependencies" in res.stderr
    assert "opencv2/core.hpp" in res.stderr
    assert "apt-get install -y libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev" in res.stderr
    assert "Traceback" not in res.stderr
