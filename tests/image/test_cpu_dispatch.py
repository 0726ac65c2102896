"""CPU dispatch of the ISA-specific kernels (issue 44; csrc/core/fq_cpu.h, docs/platforms.md).

* Every FASTQ_CPU mask this CPU can honour gives the default's bytes, over every kernel
  family (scripts/cpu_dispatch_batches.py: colour tables, warp, blends, policies,
  erasing, TensorpackColor / TensorpackCrop, bicubic resize, the float32 write, float16
  MixUp, CRC-32C of TFRecord reading), each in a fresh process, and reports the mask;
* under each mask, in a fresh process, the golden and op reference tests pass (slow);
* the runtime switch (fastq._native._image.set_cpu_level) does the same in one process;
* what is in effect is the CPU's features capped by the mask, an unknown FASTQ_CPU
  warns (naming the variable and the accepted values) and selects the baseline;
* `fastq info` and Pipeline.stats() say which kernels run;
* no function compiled with a target attribute checks the CPU itself (the bug: an
  AVX-512 function's prologue ran before its own check), and no code asks the CPU
  anywhere but csrc/core/fq_cpu.c.
The same digests under CPU models this machine is not: scripts/test_cpu_models.sh."""
import glob
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import fastq
from fastq._native import _image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(fastq.__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "cpu_dispatch_batches.py")
CSRC = os.path.join(ROOT, "csrc")

DETECTED = set(_image.cpu_dispatch()["detected"])
LEVEL_FEATURES = {"baseline": set(), "avx2": {"sse4.2", "f16c", "avx2"},
                  "avx512": {"sse4.2", "f16c", "avx2", "avx512vbmi"}}
# the highest level each mask can give on this CPU ("level" of cpu_dispatch)
HONOURED = ["baseline"] + (["avx2"] if "avx2" in DETECTED else []) + \
    (["avx512"] if {"avx2", "avx512vbmi"} <= DETECTED else [])


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "FASTQ_CPU"}
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def _run(img_dir, out, **extra):
    r = subprocess.run([sys.executable, SCRIPT, "run", str(img_dir), str(out)], capture_output=True, text=True,
                       env=_env(**extra), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out) as f:
        return json.load(f), r


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    pytest.importorskip("cv2", reason="the test images are encoded with cv2")
    d = tmp_path_factory.mktemp("cpu_dispatch") / "img"
    r = subprocess.run([sys.executable, SCRIPT, "make", str(d)], capture_output=True, text=True, env=_env(),
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return d


@pytest.fixture(scope="module")
def default_run(images, tmp_path_factory):
    doc, _ = _run(images, tmp_path_factory.mktemp("cpu_default") / "default.json")
    assert doc["cpu"]["mask"] == "native" and doc["cpu"]["env"] is None
    assert set(doc["cpu"]["effective"]) == DETECTED
    return doc


@pytest.mark.parametrize("level", HONOURED)
def test_each_mask_gives_the_default_bytes_and_reports_itself(images, default_run, tmp_path, level):
    doc, _ = _run(images, tmp_path / f"{level}.json", FASTQ_CPU=level)
    cpu = doc["cpu"]
    assert cpu["mask"] == level and cpu["env"] == level and cpu["env_error"] == ""
    assert cpu["level"] == level
    assert set(cpu["effective"]) == LEVEL_FEATURES[level] & DETECTED
    assert doc["stats_cpu"] == cpu  # Pipeline.stats()["cpu"]
    if level == "baseline":
        assert all(v.startswith("baseline") for v in cpu["kernels"].values()), cpu["kernels"]
    if level == "avx2":
        assert cpu["kernels"]["color_lut"] == "baseline" and cpu["kernels"]["augment"] == "AVX2"
    if level == "avx512":
        assert cpu["kernels"]["color_lut"] == "AVX-512 VBMI"
    differ = {k for k, v in doc["digests"].items() if v != default_run["digests"][k]}
    assert not differ, {k: (doc["digests"][k], default_run["digests"][k]) for k in differ}
    assert not any(v.startswith("error") for v in doc["digests"].values()), doc["digests"]


@pytest.mark.slow
@pytest.mark.parametrize("level", HONOURED)
def test_golden_and_op_tests_pass_under_each_mask(level):
    """The frozen golden vectors and the ops' reference tests (torchvision / PIL / tensorpack
    replays) in a process with FASTQ_CPU set (30-90 s each on 2 cores)."""
    files = ["tests/image/test_golden.py", "tests/ops/test_aug_ops.py", "tests/ops/test_policies.py"]
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *files], cwd=ROOT,
                       capture_output=True, text=True, env=_env(FASTQ_CPU=level), timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in r.stdout.splitlines()[-1], r.stdout[-500:]


def test_a_mask_above_the_cpu_is_capped_to_the_cpu():
    prev = _image.set_cpu_level("native")
    try:
        for level, feats in LEVEL_FEATURES.items():
            _image.set_cpu_level(level)
            d = _image.cpu_dispatch()
            assert d["mask"] == level
            assert set(d["effective"]) == feats & DETECTED  # never a feature the CPU lacks
            assert set(d["detected"]) == DETECTED
    finally:
        _image.set_cpu_level(prev)


def _epoch(paths, ops, dtype="uint8"):
    with fastq.Pipeline(fastq.sources.Files(paths, labels=[0] * len(paths)), batch_size=4, workers=2, seed=3,
                        shuffle=False, pin_memory=False, ops=ops, dtype=dtype) as p:
        return [b[0].copy() for b in p]


def test_set_cpu_level_at_run_time_gives_the_same_bytes(images):
    from fastq import ops as O
    paths = sorted(glob.glob(os.path.join(images, "*.jpg")))
    chains = [([O.Resize((64, 64)), O.AutoContrast(), O.Equalize(), O.Color(1.6), O.Sharpness(0.3),
                O.Rotate(17.0)], "uint8"),
              ([O.TensorpackCrop(48), O.TensorpackColor(), O.Normalize()], "float32")]
    prev = _image.set_cpu_level("native")
    try:
        ref = [_epoch(paths, c, t) for c, t in chains]
        for level in HONOURED:
            assert _image.set_cpu_level(level) in ("native", *HONOURED)
            assert _image.cpu_dispatch()["level"] == level
            got = [_epoch(paths, c, t) for c, t in chains]
            for a, b in zip(ref, got):
                assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b)), level
    finally:
        _image.set_cpu_level(prev)
    with pytest.raises(ValueError, match="baseline, avx2, avx512"):
        _image.set_cpu_level("avx3")
    with pytest.raises(ValueError):
        _image.set_cpu_level("")


def test_an_unknown_fastq_cpu_warns_and_selects_the_baseline():
    code = "from fastq._native import _image; import json; print(json.dumps(_image.cpu_dispatch()))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(FASTQ_CPU="AVX2"),
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "RuntimeWarning" in r.stderr and "FASTQ_CPU=AVX2" in r.stderr and "baseline, avx2, avx512" in r.stderr
    d = json.loads(r.stdout)
    assert d["mask"] == "baseline" and d["level"] == "baseline" and d["effective"] == []
    assert "FASTQ_CPU=AVX2" in d["env_error"]


def test_fastq_info_says_which_kernels_run():
    r = subprocess.run([sys.executable, "-m", "fastq", "info", "--json"], capture_output=True, text=True,
                       env=_env(FASTQ_CPU="avx2"), timeout=300)
    assert r.returncode == 0, r.stderr
    k = json.loads(r.stdout)["native"]["fastq_kernels"]
    assert k["mask"] == "avx2" and k["env"] == "avx2" and set(k["detected"]) == DETECTED
    assert k["kernels"]["color_lut"] == "baseline"
    assert k["level"] == ("avx2" if "avx2" in DETECTED else "baseline")
    r = subprocess.run([sys.executable, "-m", "fastq", "info"], capture_output=True, text=True,
                       env=_env(FASTQ_CPU="baseline"), timeout=300)
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stdout.splitlines() if x.startswith("fastq kernels:")]
    assert line and "baseline (mask baseline, FASTQ_CPU=baseline" in line[0] and "color_lut baseline" in line[0]


# ---- static: the check is outside the ISA-specific code --------------------------------------

def _sources():
    return sorted(glob.glob(os.path.join(CSRC, "**", "*.c"), recursive=True) +
                  glob.glob(os.path.join(CSRC, "**", "*.cpp"), recursive=True) +
                  glob.glob(os.path.join(CSRC, "**", "*.h"), recursive=True))


def _target_function_bodies(text):
    """(name, body) of every function defined with __attribute__((target(...))), directly or
    through a macro defined as one."""
    macros = re.findall(r"#define\s+(\w+)\s+__attribute__\(\(target\(", text)
    starts = [m.start() for m in re.finditer(r"^\s*(?:template\s*<[^>]*>\s*)?(?:__attribute__\(\(target\(|(?:%s)\b)"
                                            % "|".join(map(re.escape, macros or ["__no_macro__"])), text, re.M)]
    out = []
    for s in starts:
        if text[s:].lstrip().startswith("#define"):
            continue
        brace, semi = text.find("{", s), text.find(";", s)
        if brace < 0 or 0 <= semi < brace:
            continue  # a declaration
        depth, i = 0, brace
        while True:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        head = text[s:brace]
        name = re.findall(r"(\w+)\s*\(", head.split(")))")[-1] if ")))" in head else head)
        out.append((name[0] if name else head.strip()[:60], text[brace:i + 1]))
    return out


CPU_CHECK = re.compile(r"fq_cpu_|__builtin_cpu_|cpuid|xgetbv|\w+_ok\s*\(|simd_\w*enabled|\.get\(\)")


def test_no_function_compiled_for_an_extension_checks_the_cpu_itself():
    found = {}
    for path in _sources():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for name, body in _target_function_bodies(text):
            found[f"{os.path.relpath(path, CSRC)}:{name}"] = body
            hit = CPU_CHECK.search(body)
            assert not hit, f"{os.path.relpath(path, CSRC)}: {name} (compiled for an extension) checks " \
                            f"{hit.group(0)!r} itself: check before the call, in baseline code"
    # the kernels of issue 44 are all seen by the parser above
    names = {k.split(":")[1] for k in found}
    for k in ("geom_warp_avx2", "sharpness_avx2", "color_avx2", "gray_sum_avx2", "lut_vbmi", "write_avx2", "run",
              "hpass", "vpass", "mix_f16_f16c", "crc_hw"):
        assert k in names, (k, sorted(names))


def test_only_fq_cpu_asks_the_cpu():
    for path in _sources():
        if path.endswith(os.path.join("core", "fq_cpu.c")):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        assert not re.search(r"__builtin_cpu_(supports|init)|__get_cpuid|<cpuid\.h>|xgetbv", text), path
