"""``fastq info``: versions of fastq and the native libraries it runs with, CPU,
CUDA, frameworks."""
import json
import os

from fastq.bench.measure import cpu_model
from fastq.cli.base import arg, command

__all__ = ["collect_info"]


def _dpkg_owner(path):
    """(package, version) of the Debian package that installed `path`, or None."""
    import subprocess
    try:
        r = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            return None
        pkg = r.stdout.split("\n")[0].split(": ")[0].strip()  # "libjpeg62-turbo:amd64: /usr/lib/..."
        v = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True, timeout=20)
        return (pkg, v.stdout.strip()) if v.returncode == 0 else (pkg, "")
    except (OSError, subprocess.SubprocessError):
        return None


def _dist_version(module):
    """Version of an installed module from its distribution metadata, without importing it."""
    import importlib.metadata as md
    import importlib.util
    try:
        if importlib.util.find_spec(module) is None:
            return None
    except (ImportError, ValueError):
        return None
    top = module.split(".")[0]
    names = md.packages_distributions().get(top, [])
    if module == "nvidia.dali":
        names = [n for n in names if n.startswith("nvidia-dali")] or names
    for n in names:
        try:
            return md.version(n)
        except md.PackageNotFoundError:
            continue
    return "installed (version unknown)"


def collect_info():
    """Everything `fastq info` prints, as a dict."""
    import platform
    import fastq
    out = {"fastq": {"version": fastq.__version__, "path": os.path.dirname(os.path.abspath(fastq.__file__))},
           "python": platform.python_version(), "platform": platform.platform()}
    try:
        from fastq._native import _image
        nv = _image.native_versions()
    except ImportError as e:
        nv = {"error": f"fastq._native._image does not import: {e}"}
    if "error" not in nv:
        for key in ("libjpeg_library", "opencv_library"):
            owner = _dpkg_owner(nv[key]) if nv.get(key) else None
            nv[key.replace("_library", "_package")] = {"name": owner[0], "version": owner[1]} if owner else None
        env = [k for k in ("JSIMD_FORCENONE", "JSIMD_FORCESSE2", "JSIMD_FORCEAVX2") if os.environ.get(k) == "1"]
        if env:
            nv["libjpeg_turbo_simd"] = f"forced by {env[0]}"
        elif platform.machine() in ("x86_64", "AMD64"):
            nv["libjpeg_turbo_simd"] = ("AVX2" if "AVX2" in nv["cpu_simd"] else "SSE2") + \
                " (libjpeg-turbo picks its x86-64 SIMD code from CPUID at run time)"
        else:
            nv["libjpeg_turbo_simd"] = f"{platform.machine()}: chosen by libjpeg-turbo at run time"
        nv["fastq_kernels"] = _image.cpu_dispatch()
    out["native"] = nv
    try:
        aff = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        aff = None
    cpu = {"count": os.cpu_count(), "usable": len(aff) if aff is not None else os.cpu_count(), "affinity": aff}
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            q, period = f.read().split()
            cpu["cgroup_quota_cores"] = None if q == "max" else int(q) / int(period)
    except (OSError, ValueError):
        pass
    cpu["model"] = cpu_model()
    from fastq import scheduling
    sched = scheduling.resolve("background")
    cpu["default_workers"] = sched.default_workers
    cpu["reserved_for_consumer"] = scheduling.format_cpus(sched.reserved)
    out["cpu"] = cpu
    from fastq.device import cuda
    cu = {"runtime_candidates": cuda.runtime_candidates()}
    cu["devices"] = 0
    try:
        from fastq._native import _cuda
        _cuda.load(cu["runtime_candidates"])
        cu["runtime"] = "loaded"
        cu["devices"] = _cuda.device_count()
    except Exception as e:  # noqa: BLE001 - reported, never raised: info must always print
        cu["runtime"] = f"loaded, but {e}" if cu.get("runtime") == "loaded" else f"not loaded: {e}"
    ok, why = cuda.available()
    cu["pinning"] = "would work: slot memory is registered with cudaHostRegister" if ok else f"would not work: {why}"
    cu["pinning_ok"] = ok
    out["cuda"] = cu
    out["frameworks"] = {m: _dist_version(m) for m in
                         ("tensorflow", "torch", "jax", "tensorpack", "nvidia.dali", "cv2", "numpy")}
    return out


def _print_info(d):
    f, nv, cpu, cu = d["fastq"], d["native"], d["cpu"], d["cuda"]
    print(f"fastq {f['version']}  ({f['path']})")
    print(f"Python {d['python']} on {d['platform']}")
    if "error" in nv:
        print(f"native image module: {nv['error']}")
    else:
        def pkg(k):
            p = nv.get(k)
            return f"; Debian package {p['name']} {p['version']}" if p else ""
        print(f"libjpeg-turbo {nv['libjpeg_turbo']} (built against; libjpeg ABI {nv['jpeg_lib_version']}), "
              f"loaded: {nv['libjpeg_library'] or 'unknown'}{pkg('libjpeg_package')}")
        print(f"OpenCV {nv['opencv']} (cv::getVersionString(); built against {nv['opencv_build']}), "
              f"loaded: {nv['opencv_library'] or 'unknown'}{pkg('opencv_package')}")
        print(f"SIMD: CPU has {' '.join(nv['cpu_simd']) or 'none found'}; OpenCV baseline/dispatch: "
              f"{nv['opencv_cpu_features']} (optimized code {'on' if nv['opencv_optimized'] else 'OFF'}); "
              f"libjpeg-turbo: {nv['libjpeg_turbo_simd']}")
        k = nv["fastq_kernels"]
        print(f"fastq kernels: {k['level']} (mask {k['mask']}"
              f"{', FASTQ_CPU=' + k['env'] if k['env'] is not None else ''}; in effect: "
              f"{' '.join(k['effective']) or 'none'} of the CPU's {' '.join(k['detected']) or 'none'}): "
              + ", ".join(f"{name} {how}" for name, how in k["kernels"].items()))
        if k["env_error"]:
            print(f"  warning: {k['env_error']}")
    aff = cpu["affinity"]
    quota = cpu.get("cgroup_quota_cores")
    print(f"CPU: {cpu['model']}; {cpu['count']} logical CPUs, {cpu['usable']} usable by this process"
          f"{' (affinity ' + ','.join(map(str, aff)) + ')' if aff is not None else ''}"
          f"{f'; cgroup quota {quota:g} cores' if quota else ''}; default fastq workers = {cpu['default_workers']}"
          f" (SCHED_BATCH, nice +19{'; CPUs ' + cpu['reserved_for_consumer'] + ' kept for the training thread' if cpu['reserved_for_consumer'] else ''})")
    print(f"CUDA runtime: {cu['runtime']}; GPUs: {cu['devices']}")
    print(f"pinned slot memory (pin_memory='auto'): {cu['pinning']}")
    fw = ", ".join(f"{k} {v}" if v else f"{k}: not installed" for k, v in d["frameworks"].items())
    print(f"frameworks: {fw}")


@command("info", help="versions of fastq and the native libraries it runs with, CPU, CUDA, frameworks", args=[
    arg("--json", action="store_true", help="print the same facts as JSON"),
])
def cmd_info(a):
    """Print fastq's version; the libjpeg-turbo and OpenCV it runs with (the library
    files the dynamic linker loaded, their Debian packages, OpenCV's own version
    call); SIMD in use, and which of fastq's own CPU-specific kernels run (baseline, AVX2,
    AVX-512 VBMI) under which FASTQ_CPU mask; CPU count and affinity; whether a CUDA runtime and GPU
    were found and whether pinned slot memory would work (and why not); which of
    TensorFlow, PyTorch, JAX, tensorpack, DALI are installed."""
    d = collect_info()
    if a.json:
        print(json.dumps(d, indent=1))
    else:
        _print_info(d)
    return 0
