"""Build script for fastq's compiled core.

Two ways to get the native libraries (OpenCV core/imgproc/imgcodecs and libjpeg-turbo's
libjpeg API):

* Vendored (what the wheel ships): FASTQ_VENDORED_PREFIX=<prefix printed by
  scripts/build_deps.sh>.  OpenCV 4.6, libjpeg-turbo 2.1.5, libpng, libwebp and zlib
  are linked statically from that prefix; nothing but glibc, libstdc++ and libgcc is
  needed at run time.  `bash scripts/build_wheel.sh` does all of this.
* System (the default, for development on Debian 12 / Ubuntu): the shared libraries of

    libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev   (OpenCV 4.6)
    libjpeg62-turbo-dev                                                (libjpeg-turbo)

  found with pkg-config when a .pc file exists, otherwise in the standard Debian
  locations.  Overrides (os.pathsep-separated lists):
      FASTQ_INCLUDE_DIRS, FASTQ_LIBRARY_DIRS
      FASTQ_OPENCV_INCLUDE  (directory that holds opencv2/, default /usr/include/opencv4)

Either way every extension exports only its PyInit_* symbol (a linker version
script), so fastq coexists in one process with pip's cv2 and TensorFlow's libraries.

The files of csrc/ are compiled once, into static libraries (build_clib): one per
component folder (CSRC_COMPONENTS below: csrc/core, ring, task, records, cuda, net in C11,
csrc/image in C++17, in stage sub-folders), its sources found by glob; each extension
module is its Cython file plus the libraries it needs.

Other knobs:
    FASTQ_DEBUG=1      -O0 -g instead of -O3
    FASTQ_SANITIZE=address,undefined | thread   build everything with sanitizers
    FASTQ_ONLY=_core|_image|_cuda               build one extension (development)
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

APT_HINT = (
    "apt-get install -y libopencv-core-dev libopencv-imgproc-dev "
    "libopencv-imgcodecs-dev libjpeg62-turbo-dev zlib1g-dev pkg-config"
)
VENDORED_HINT = ("or build the static libraries with `bash scripts/build_deps.sh` and set "
                 "FASTQ_VENDORED_PREFIX to the prefix it prints")

# Static archives of a vendored prefix, in link order (a library before those it uses).
VENDORED_LIBS = ["opencv_imgcodecs", "opencv_imgproc", "opencv_core", "webp", "png16", "tiff", "jpeg", "z"]


def _fail(lines):
    sys.stderr.write("\nfastq: " + "\n".join(lines) + "\n\n")
    raise SystemExit(1)


def _env_list(name):
    v = os.environ.get(name, "")
    return [p for p in v.split(os.pathsep) if p]


def _pkgconfig(pkg, flag):
    if not shutil.which("pkg-config"):
        return None
    try:
        out = subprocess.run(["pkg-config", flag, pkg], check=True, capture_output=True, text=True).stdout
    except (subprocess.CalledProcessError, OSError):
        return None
    return out.split()


def _find_vendored(prefix):
    """Include dirs and static archives (full paths, link order) of a build_deps.sh prefix."""
    missing = []
    if not os.path.isfile(os.path.join(prefix, ".complete")):
        missing.append(f"{prefix}/.complete (the prefix is not a finished scripts/build_deps.sh build)")
    archives = []
    for name in VENDORED_LIBS:
        found = sorted(glob.glob(os.path.join(prefix, "lib*", f"lib{name}.a")) +
                       glob.glob(os.path.join(prefix, "lib*", "*", f"lib{name}.a")))
        if found:
            archives.append(found[0])
        else:
            missing.append(f"lib{name}.a")
    incs = [os.path.join(prefix, "include", "opencv4"), os.path.join(prefix, "include")]
    for h, d in (("opencv2/imgcodecs.hpp", incs[0]), ("jpeglib.h", incs[1])):
        if not os.path.exists(os.path.join(d, h)):
            missing.append(f"{h} (looked in {d})")
    if missing:
        _fail([f"FASTQ_VENDORED_PREFIX={prefix} is missing: " + ", ".join(missing),
               "Rebuild it with `bash scripts/build_deps.sh` (it prints the prefix to use)."])
    return incs, archives


def _find_system():
    include_dirs = _env_list("FASTQ_INCLUDE_DIRS")
    library_dirs = _env_list("FASTQ_LIBRARY_DIRS")
    missing = []

    # OpenCV: opencv4.pc only ships with the full libopencv-dev; fall back to the Debian path.
    cv_inc = os.environ.get("FASTQ_OPENCV_INCLUDE")
    cflags = _pkgconfig("opencv4", "--cflags-only-I")
    if not cv_inc and cflags:
        cv_inc = cflags[0][2:]
    if not cv_inc:
        cv_inc = "/usr/include/opencv4"
    for h in ("opencv2/core.hpp", "opencv2/imgproc.hpp", "opencv2/imgcodecs.hpp"):
        if not os.path.exists(os.path.join(cv_inc, h)):
            missing.append(f"{h} (looked in {cv_inc})")
    include_dirs.append(cv_inc)

    # libjpeg-turbo's libjpeg API (jpeg_crop_scanline, jpeg_skip_scanlines).
    search = include_dirs + ["/usr/include", "/usr/local/include", "/usr/include/x86_64-linux-gnu",
                             "/usr/include/aarch64-linux-gnu"]
    if not any(os.path.exists(os.path.join(d, "jpeglib.h")) for d in search):
        missing.append("jpeglib.h")
    # zlib: the TFRecord stream reader inflates GZIP/ZLIB shards (csrc/records/fq_tfr_stream.c).
    if not any(os.path.exists(os.path.join(d, "zlib.h")) for d in search):
        missing.append("zlib.h")
    if missing:
        _fail(["missing native build dependencies: " + ", ".join(missing),
               "On Debian/Ubuntu install them with:\n    " + APT_HINT,
               "(or point FASTQ_INCLUDE_DIRS / FASTQ_OPENCV_INCLUDE / FASTQ_LIBRARY_DIRS at them,",
               " " + VENDORED_HINT + ")"])
    # dl: CustomOp loads user libraries (csrc/image/api/fq_image_custom.cpp)
    return include_dirs, library_dirs, ["opencv_imgcodecs", "opencv_imgproc", "opencv_core", "jpeg", "z", "dl"]


def _native():
    """(include_dirs, library_dirs, libraries, extra_objects) of the image libraries."""
    prefix = os.environ.get("FASTQ_VENDORED_PREFIX")
    if prefix:
        incs, archives = _find_vendored(os.path.abspath(prefix))
        # Full archive paths keep the link static even where a shared library of the
        # same name is installed; dl/pthread/m are what OpenCV's core needs from glibc.
        return incs, [], [":" + os.path.basename(a) for a in archives] + ["dl", "m"], \
            sorted({os.path.dirname(a) for a in archives})
    inc, libdirs, libs = _find_system()
    return inc, libdirs, libs, []


def _common_flags():
    flags = ["-Wall", "-Wextra", "-pthread", "-fvisibility=hidden"]
    link = ["-pthread"]
    if os.environ.get("FASTQ_DEBUG"):
        flags += ["-O0", "-g"]
    else:
        flags += ["-O3"]
    san = os.environ.get("FASTQ_SANITIZE")
    if san:
        flags += [f"-fsanitize={san}", "-fno-omit-frame-pointer", "-g"]
        link += [f"-fsanitize={san}"]
    return flags, link


FLAGS, LINK = _common_flags()
C_FLAGS = FLAGS + ["-std=c11"]
CXX_FLAGS = FLAGS + ["-std=c++17"]
# Cython-generated code triggers these; our own csrc/ files are built with the full set.
CYTHON_FLAGS = CXX_FLAGS + ["-Wno-unused-function", "-Wno-unused-parameter",
                            "-Wno-missing-field-initializers", "-Wno-unreachable-code"]
# fastq._native._image also exports fastq_capi_v1 (csrc/image/fq_capi.h): the image C API as one
# versioned table, for the TensorFlow kernel that fastq.tf.ops builds at first use;
# fastq._native._core exports fastq_ring_capi_v1 (csrc/ring/fq_ring_capi.h), the ring's consumer
# side, for the kernel's dataset op (fastq.tf.dataset).
EXPORTS_MAP = "{ global: PyInit_*; fastq_capi_v1; fastq_ring_capi_v1; local: *; };\n"
# What fastq.tf.ops compiles against the installed TensorFlow, as paths under csrc/: shipped
# in the package as fastq/_tf_kernel/<same path> (BuildPy), read from csrc/ in a checkout.
# C headers users compile against, installed flat in fastq/include/ (fastq.get_include())
PUBLIC_HEADERS = ["image/fastq_custom_op.h"]
TF_KERNEL_FILES = ["tf/fq_tf_kernel.cc", "tf/fq_tf_feed.cc", "tf/fq_tf_dataset.cc", "tf/fq_tf_dataset.h",
                   "tf/fq_tf_feed.h", "image/fq_capi.h", "image/fq_image.h", "image/fq_batch_mix.h",
                   "image/fq_batch_pad.h", "ring/fq_ring_capi.h", "ring/fq_ring.h", "core/fq_common.h",
                   "core/fq_stage_times.h"]


class BuildExt(build_ext):
    """Links each module with a version script (only PyInit_* exported) and without the
    build machine's run-time library path (Python's LDSHARED carries -Wl,-rpath)."""

    def run(self):
        # `setup.py build_ext --inplace` alone does not build the csrc/ libraries.
        if self.distribution.has_c_libraries():
            self.run_command("build_clib")
        super().run()

    def build_extensions(self):
        for attr in ("linker_so", "linker_so_cxx"):
            cmd = getattr(self.compiler, attr, None)
            if cmd:
                setattr(self.compiler, attr, [a for a in cmd if not a.startswith(("-Wl,-rpath", "-Wl,-R"))])
        os.makedirs(self.build_temp, exist_ok=True)
        mapfile = os.path.join(self.build_temp, "fastq_exports.map")
        with open(mapfile, "w") as f:
            f.write(EXPORTS_MAP)
        # The version script alone decides what is exported (no --exclude-libs: the
        # exported tables live in the static libfastq_image.a and libfastq_ring.a).
        for e in self.extensions:
            e.extra_link_args = list(e.extra_link_args) + [f"-Wl,--version-script={mapfile}", "-Wl,--gc-sections"]
        super().build_extensions()


# csrc/ is one folder per component, each compiled into ONE static library from every
# .c / .cpp file in that folder and in its stage sub-folders (csrc/image/decode/,
# geometry/, ...; found by glob, never listed by hand): a new file or stage of a
# component needs no edit here.  Private headers sit in <folder>/internal/, or in a
# stage's folder when only that stage includes them.
# Includes name the component ("core/fq_common.h", from -Icsrc) and point one way:
#   core <- ring <- task;  core <- image <- task <- records;  core <- cuda;  core <- net
# Folders under csrc/ that are NOT built into the extensions are named in CSRC_NOT_BUILT
# (tests: the C drivers and fuzzers; tf: the TensorFlow kernel, built separately against
# the installed TensorFlow at first use); any other folder must be in CSRC_COMPONENTS.
CSRC_COMPONENTS = {
    # folder:  (library,          language)
    "core": ("fastq_core", "c"),        # errors, clock, io helpers, rng, stage-time record
    "ring": ("fastq_ring", "c"),        # slot ring + worker pool
    "image": ("fastq_image", "c++"),    # the per-sample image path (OpenCV, libjpeg-turbo)
    "task": ("fastq_task", "c"),        # the image task + the fq_sample_reader interface
    "records": ("fastq_records", "c"),  # TFRecord (indexed + stream), tar, read-ahead
    "cuda": ("fastq_cuda", "c"),        # dlopen'ed CUDA runtime: pin / unpin
    "net": ("fastq_net", "c"),          # the HTTP(S) client of remote sources (fastq/sources/nethttp.py)
}
CSRC_NOT_BUILT = {"tests", "tf"}


def _component_sources(folder):
    """The .c / .cpp files of csrc/<folder> and of its stage sub-folders (one level, not
    internal/), sorted."""
    ext = ".cpp" if CSRC_COMPONENTS[folder][1] == "c++" else ".c"

    def files(pattern):
        return sorted(glob.glob(os.path.join("csrc", folder, pattern))
                      + [p for p in glob.glob(os.path.join("csrc", folder, "*", pattern))
                         if os.path.basename(os.path.dirname(p)) != "internal"])
    found = files("*" + ext)
    other = files("*.c" if ext == ".cpp" else "*.cpp") + sorted(glob.glob(os.path.join("csrc", folder, "internal", "*.c*")))
    if other or not found:
        _fail([f"csrc/{folder}/ must hold {CSRC_COMPONENTS[folder][1]} sources only, found "
               f"{other or 'none'}"])
    return found


def _check_csrc_folders():
    folders = {d for d in os.listdir("csrc") if os.path.isdir(os.path.join("csrc", d))}
    unknown = sorted(folders - set(CSRC_COMPONENTS) - CSRC_NOT_BUILT)
    if unknown:
        _fail([f"csrc/ folders {unknown} are not in setup.py's CSRC_COMPONENTS (or CSRC_NOT_BUILT)"])


def _clib(folder, headers, extra_includes=()):
    lib, lang = CSRC_COMPONENTS[folder]
    return (lib, {"sources": _component_sources(folder), "include_dirs": ["csrc"] + list(extra_includes),
                  "cflags": CXX_FLAGS if lang == "c++" else C_FLAGS, "obj_deps": {"": headers}})


def _config():
    import numpy
    from Cython.Build import cythonize

    only = os.environ.get("FASTQ_ONLY")  # development knob: build just one extension
    want = lambda name: only in (None, "", name)  # noqa: E731
    need_image = want("_image") and os.path.exists("fastq/_native/_image.pyx")
    inc, libdirs, libs, extra_libdirs = _native() if need_image else ([], [], [], [])

    # csrc/ is compiled once, one static library per component folder, linked by the
    # modules that need it (dependents before what they use).  A header change rebuilds
    # them (obj_deps).
    _check_csrc_folders()
    headers = sorted(glob.glob("csrc/*/*.h") + glob.glob("csrc/*/*/*.h"))  # internal/ and stage folders
    folders = ["core", "ring", "net"]
    if want("_cuda"):
        folders.append("cuda")
    if need_image:
        folders += ["image", "task", "records"]
    clibs = [_clib(f, headers, inc if f == "image" else ()) for f in folders]
    libs_of = lambda *fs: [CSRC_COMPONENTS[f][0] for f in fs]  # noqa: E731

    common = dict(
        include_dirs=["csrc", numpy.get_include()],
        depends=sorted(glob.glob("csrc/*/*.[ch]") + glob.glob("csrc/*/*.cpp") + glob.glob("csrc/*/*/*.[ch]")
                       + glob.glob("csrc/*/*/*.cpp")
                       + glob.glob("fastq/_native/*.pxd") + glob.glob("fastq/_native/includes/*.pxd")
                       + glob.glob("fastq/_native/*.pxi")),
        extra_compile_args=CYTHON_FLAGS,
        extra_link_args=LINK,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        language="c++",
    )
    exts = []
    if want("_core"):
        exts.append(Extension("fastq._native._core", ["fastq/_native/_core.pyx"], libraries=libs_of("net", "ring", "core") + ["dl"], **common))
    if need_image:
        exts.append(Extension("fastq._native._image", ["fastq/_native/_image.pyx"],
                              library_dirs=libdirs + extra_libdirs,
                              libraries=libs_of("records", "task", "image", "ring", "core") + libs, **common))
    if want("_cuda") and os.path.exists("fastq/_native/_cuda.pyx"):
        # CUDA is loaded at run time with dlopen: no CUDA headers or libraries at build time.
        exts.append(Extension("fastq._native._cuda", ["fastq/_native/_cuda.pyx"], libraries=libs_of("cuda", "core") + ["dl"], **common))
    if os.environ.get("FASTQ_TESTING") == "1" and want("_testing"):
        # fastq._native._testing: native helpers for fastq's own tests (tests/native/_testing.pyx),
        # built into the package only for development; the wheel never contains it.
        if not os.path.exists("tests/native/_testing.pyx"):
            sys.exit("setup.py: FASTQ_TESTING=1 needs tests/native/_testing.pyx (a git checkout; "
                     "the sdist has no tests)")
        clibs.append(("fastq_testing", {"sources": ["csrc/tests/fq_testtask.c"], "include_dirs": ["csrc", "csrc/tests"],
                                        "cflags": C_FLAGS, "obj_deps": {"": headers}}))
        exts.append(Extension("fastq._native._testing", ["tests/native/_testing.pyx"],
                              libraries=["fastq_testing"] + libs_of("ring", "core"),
                              **{**common, "include_dirs": common["include_dirs"] + ["csrc/tests"]}))
    ext_modules = cythonize(exts, language_level=3, include_path=["."],
                            compiler_directives={"boundscheck": False, "wraparound": False})
    return dict(ext_modules=ext_modules, libraries=clibs)


class BuildPy(build_py):
    """Also copies the TensorFlow kernel's source and the C headers it includes into the
    package (fastq/_tf_kernel/, the csrc/ tree kept), where fastq.tf.ops finds them in an
    installed wheel."""

    def run(self):
        super().run()
        for rel in TF_KERNEL_FILES:
            dst = os.path.join(self.build_lib, "fastq", "_tf_kernel", rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            self.copy_file(os.path.join("csrc", rel), dst)
        # the public header of custom ops (fastq.get_include(); docs/custom_ops.md)
        for rel in PUBLIC_HEADERS:
            dst = os.path.join(self.build_lib, "fastq", "include", os.path.basename(rel))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            self.copy_file(os.path.join("csrc", rel), dst)


def _sdist_only():
    return any(a in ("sdist", "egg_info", "--name", "--version", "dist_info") for a in sys.argv[1:]) and not any(
        a.startswith(("build", "bdist", "install", "develop", "editable_wheel")) for a in sys.argv[1:])


setup(cmdclass={"build_ext": BuildExt, "build_py": BuildPy}, **({} if _sdist_only() else _config()))
