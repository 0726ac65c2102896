"""A native TensorFlow op that runs fastq's decode + op chain inside the TF graph.

    import fastq.ops as ops, fastq.tf.ops as fqt
    chain = [ops.RandomResizedCrop(224), ops.HorizontalFlip()]
    ds = (tf.data.Dataset.from_tensor_slices((paths, tf.range(n, dtype=tf.int64)))
          .batch(64, drop_remainder=True)
          .map(lambda p, i: (fqt.decode_augment_files(p, i, ops=chain, seed=7, epoch=0), i),
               num_parallel_calls=2))
    # encoded bytes from elsewhere (TFRecords, ...): fqt.decode_augment(encoded, index, ...)
    # uint8 batches; normalize on the accelerator, exactly as fastq's Normalize:
    x = fqt.normalize(images, ops.IMAGENET_MEAN, ops.IMAGENET_STD)

Unlike ``fastq.tf.dataset`` (whose ``FastqDataset`` op, from the same library, reads a
Pipeline that lives only in the trainer's process), the op is a self-contained graph node
(``FastqDecodeAugment``), so a dataset that uses it can be served by tf.data service
workers in other processes (``fastq serve-worker``), traced by ``tf.function``, saved
with ``Dataset.save`` and checkpointed with ``tf.train.Checkpoint(iterator=...)``.

Determinism: row ``r`` of the output is exactly what a ``fastq.Pipeline`` over the
same images writes for dataset index ``index[r]`` in epoch ``epoch`` with seed
``seed`` (same C function, same spec), whatever thread or process runs it.

How the op reaches fastq's C code (the ABI)
-------------------------------------------
The kernel library is tied to TensorFlow's C++ ABI, so it is compiled on this machine,
at first use (:func:`load`), against the installed TensorFlow's headers with
``tf.sysconfig.get_compile_flags()/get_link_flags()``, and cached under
:func:`cache_dir` in a folder keyed by the TF version, the flags, the compiler and a
hash of the sources (takes ~20-60 s once; ``python -m fastq.tf.ops`` builds it ahead
of time).  It needs a C++17 compiler (``$CXX``, else ``g++`` or ``c++``) and TF's
headers (in the pip wheel); without them :func:`load` raises
:class:`KernelBuildError` naming the TF version, and the rest of fastq is unaffected.
The kernel does not link fastq: ``fastq._native._image`` exports one versioned table of C
function pointers (``fastq_capi_v1``, csrc/image/fq_capi.h); after
``tf.load_op_library`` the loader hands the path of ``fastq._native._image`` to the kernel
library, which finds the table with ``dlopen(RTLD_NOLOAD)`` + ``dlsym`` and checks its
ABI version and struct sizes.

Threads: each op instance runs its rows on its own pool of ``num_threads`` native
threads (0: the usable cores), asynchronously (no TF thread blocks while a batch is
decoded).  ``Dataset.map(num_parallel_calls=k)`` lets k batches share that pool.
"""
import ctypes
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from fastq.errors import FastqError

__all__ = ["load", "build", "cache_dir", "decode_augment", "decode_augment_files", "normalize", "normalize_table", "NormalizeLayer",
           "KernelBuildError", "OP_NAME"]

OP_NAME = "FastqDecodeAugment"
_LIB_NAME = "libfastq_tf_kernel.so"
_KERNEL = "tf/fq_tf_kernel.cc"
# the library's translation units: FastqDecodeAugment; FastqDataset (fastq.tf.dataset)
_SOURCES = (_KERNEL, "tf/fq_tf_feed.cc", "tf/fq_tf_dataset.cc")
# what the kernel compiles, as paths under csrc/ (setup.py's TF_KERNEL_FILES ships the same)
_FILES = _SOURCES + ("tf/fq_tf_dataset.h", "tf/fq_tf_feed.h", "image/fq_capi.h", "image/fq_image.h",
                     "image/fq_batch_mix.h", "image/fq_batch_pad.h", "ring/fq_ring_capi.h", "ring/fq_ring.h",
                     "core/fq_common.h", "core/fq_stage_times.h")


class KernelBuildError(FastqError):
    """fastq's TensorFlow kernel could not be built or loaded on this machine."""


def _tf():
    import tensorflow as tf
    return tf


def cache_dir() -> str:
    """Where built kernels are kept: ``$FASTQ_CACHE_DIR/tf_kernel``, else
    ``$XDG_CACHE_HOME/fastq/tf_kernel``, else ``~/.cache/fastq/tf_kernel``."""
    base = os.environ.get("FASTQ_CACHE_DIR")
    if not base:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "fastq")
    return os.path.join(base, "tf_kernel")


def _source_files():
    """{path under csrc/: file} of the kernel source and the headers it includes: the copy
    an installed package carries (fastq/_tf_kernel/, the csrc/ tree kept), else a
    checkout's csrc/.  The kernel is compiled with -I at the root of that tree."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # fastq/ (this file is fastq/tf/ops.py)
    roots = [os.path.join(pkg, "_tf_kernel"), os.path.join(os.path.dirname(pkg), "csrc")]
    for root in roots:
        found = {n: os.path.join(root, n) for n in _FILES}
        if all(os.path.isfile(p) for p in found.values()):
            return found
    raise KernelBuildError(f"fastq's TensorFlow kernel sources are missing ({', '.join(_FILES)}; looked in "
                           f"{' and '.join(roots)}): reinstall fastq")


def _compiler():
    for cand in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if cand:
            exe = shutil.which(cand.split()[0])
            if exe:
                return [exe] + cand.split()[1:]
    return None


def _flags(tf):
    """TF's compile and link flags (+ $FASTQ_TF_KERNEL_CFLAGS, e.g. -fsanitize=undefined for
    a checked build; part of the cache key)."""
    cflags, lflags = list(tf.sysconfig.get_compile_flags()), list(tf.sysconfig.get_link_flags())
    extra = os.environ.get("FASTQ_TF_KERNEL_CFLAGS", "").split()
    cflags, lflags = cflags + extra, lflags + [f for f in extra if f.startswith("-fsanitize")]
    # TF's headers as system headers: our own code is built with -Wall -Wextra, theirs is not ours
    cflags = [("-isystem" + f[2:]) if f.startswith("-I") else f for f in cflags]
    return cflags, lflags


def _key(tf, cxx, cflags, lflags, sources):
    try:
        cxx_id = subprocess.run(cxx + ["--version"], capture_output=True, text=True, timeout=60).stdout.split("\n")[0]
    except (OSError, subprocess.SubprocessError) as e:
        raise KernelBuildError(f"cannot run the C++ compiler {cxx[0]} ({e}) to build fastq's kernel for TensorFlow "
                               f"{tf.__version__}") from None
    h = hashlib.sha256()
    h.update(json.dumps({"tf": tf.__version__, "tf_git": getattr(tf.version, "GIT_VERSION", ""), "cflags": cflags,
                         "lflags": lflags, "cxx": cxx_id, "machine": os.uname().machine}).encode())
    for name in sorted(sources):
        with open(sources[name], "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()[:20]


_LOCK = threading.Lock()
_LOADED: dict = {}


def build(*, force: bool = False, verbose: bool = False) -> str:
    """Compile the kernel library for the installed TensorFlow (or find it in the
    cache) and return its path.  Safe to call from several processes at once (a file
    lock; the library is written to a temporary name and renamed)."""
    tf = _tf()
    sources = _source_files()
    cxx = _compiler()
    if cxx is None:
        raise KernelBuildError(f"cannot build fastq's TensorFlow kernel for TensorFlow {tf.__version__}: no C++ "
                               f"compiler found (set CXX, or install g++). The rest of fastq works without it.")
    cflags, lflags = _flags(tf)
    inc = [f[len("-isystem"):] for f in cflags if f.startswith("-isystem")]
    if not any(os.path.isfile(os.path.join(d, "tensorflow", "core", "framework", "op_kernel.h")) for d in inc):
        raise KernelBuildError(f"cannot build fastq's TensorFlow kernel for TensorFlow {tf.__version__}: its C++ "
                               f"headers are missing (tensorflow/core/framework/op_kernel.h not under "
                               f"{inc or 'tf.sysconfig.get_include()'}); install the full tensorflow wheel")
    key = _key(tf, cxx, cflags, lflags, sources)
    out_dir = os.path.join(cache_dir(), f"tf{tf.__version__}-{key}")
    lib = os.path.join(out_dir, _LIB_NAME)
    if os.path.isfile(lib) and not force:
        return lib
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same key
        if os.path.isfile(lib) and not force:
            return lib
        root = sources[_KERNEL][: -len(_KERNEL)]  # the tree's root: includes name the component
        fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=out_dir)
        os.close(fd)
        cmd = (cxx + ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-fvisibility=hidden"] + cflags
               + [f"-I{root}"] + [sources[n] for n in _SOURCES] + ["-o", tmp] + lflags)
        if verbose:
            print("fastq: building the TensorFlow kernel:", " ".join(cmd), file=sys.stderr)
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.SubprocessError) as e:
            os.unlink(tmp)
            raise KernelBuildError(f"building fastq's TensorFlow kernel for TensorFlow {tf.__version__} failed: "
                                   f"{e}") from None
        if r.returncode != 0:
            os.unlink(tmp)
            tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-25:])
            raise KernelBuildError(f"building fastq's TensorFlow kernel for TensorFlow {tf.__version__} failed "
                                   f"(exit {r.returncode}):\n  {' '.join(cmd)}\n{tail}")
        if verbose and r.stderr.strip():
            print(r.stderr, file=sys.stderr)
        os.replace(tmp, lib)
        with open(os.path.join(out_dir, "build.json"), "w") as f:
            json.dump({"tensorflow": tf.__version__, "command": cmd, "warnings": r.stderr}, f, indent=1)
    return lib


def load() -> Any:
    """Build (at first use) and load the kernel library in this process, bind it to
    fastq's C API, and return the op module (``tf.load_op_library``'s).  Idempotent and
    thread-safe.  Every process that runs the op must call it (or import this module
    and call :func:`decode_augment`): the trainer and each tf.data service worker."""
    with _LOCK:
        mod = _LOADED.get("module")
        if mod is not None:
            return mod
        tf = _tf()
        from fastq._native import _image  # the module whose fastq_capi_v1 the kernel calls
        path = build()
        try:
            mod = tf.load_op_library(path)
        except Exception as e:  # noqa: BLE001 - TF raises NotFoundError / RuntimeError for dlopen failures
            raise KernelBuildError(f"loading fastq's TensorFlow kernel ({path}) into TensorFlow {tf.__version__} "
                                   f"failed: {e}. Delete {os.path.dirname(path)} to rebuild it.") from None
        lib = ctypes.CDLL(path)  # the same handle TF just opened
        lib.fastq_tf_bind.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.fastq_tf_bind.restype = ctypes.c_int
        msg = ctypes.create_string_buffer(1024)
        if lib.fastq_tf_bind(os.fsencode(_image.__file__), msg, len(msg)) != 0:
            raise KernelBuildError(f"fastq's TensorFlow kernel could not bind to fastq's C API: "
                                   f"{msg.value.decode(errors='replace')}")
        from fastq._native import _core  # the module whose fastq_ring_capi_v1 the dataset op calls
        lib.fastq_tf_bind_ring.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.fastq_tf_bind_ring.restype = ctypes.c_int
        if lib.fastq_tf_bind_ring(os.fsencode(_core.__file__), msg, len(msg)) != 0:
            raise KernelBuildError(f"fastq's TensorFlow kernel could not bind to fastq's ring API: "
                                   f"{msg.value.decode(errors='replace')}")
        _LOADED["module"] = mod
        _LOADED["lib"] = lib
        _LOADED["path"] = path
        return mod


def library_path() -> Optional[str]:
    """Path of the kernel library loaded in this process, or None."""
    return _LOADED.get("path")


def _op_attrs(ops, dtype, layout, channels, max_pixels, dct_scaling, idct):
    from fastq import ops as fops
    kw = {} if max_pixels is None else {"max_pixels": max_pixels}
    c = fops.compile_ops(ops, dtype=dtype, layout=layout, channels=channels, dct_scaling=dct_scaling, idct=idct, **kw)
    if c.layout == "NHWC":
        h, w = c.out_shape[0], c.out_shape[1]
    else:
        h, w = c.out_shape[1], c.out_shape[2]
    tf = _tf()
    out_type = {"uint8": tf.uint8, "float32": tf.float32, "float16": tf.float16, "bfloat16": tf.bfloat16}[c.dtype]
    return dict(ops=np.ascontiguousarray(c.packed_ops).tobytes(), out_size=[int(h), int(w)], out_type=out_type,
                channels=int(c.channels), layout=c.layout, max_pixels=int(c.max_pixels),
                dct_scaling=bool(c.dct_scaling), channel_order=c.channel_order, idct=c.idct)


def decode_augment(encoded: Any, index: Any, *, ops: Any, seed: int = 0, epoch: Any = 0, dtype: Any = "uint8",
                   layout: str = "NHWC", channels: Union[int, str] = 3, max_pixels: Optional[int] = None,
                   dct_scaling: bool = True, on_error: str = "raise", num_threads: int = 0,
                   name: Optional[str] = None, idct: str = "accurate") -> Any:
    """Decode and augment a batch: ``encoded`` string[B] (JPEG/PNG/... bytes),
    ``index`` int64[B] (each sample's dataset index), ``epoch`` an int64 scalar (a
    Python int or a tensor).  Returns images ``[B, h, w, c]`` (NHWC; ``[B, c, h, w]``
    for NCHW) of ``dtype`` (uint8 by default: ship uint8 over the network and
    normalize on the accelerator with :func:`normalize`), or with
    ``on_error="skip"`` a pair ``(images, ok)``: ``ok`` bool[B] is False for a sample
    that failed (its row is zeros; drop it with ``tf.boolean_mask`` - the number of
    False is the skip count).  With ``on_error="raise"`` (default) a bad sample fails
    the call with ``InvalidArgumentError`` naming its index and reason.

    ``ops``, ``dtype``, ``layout``, ``channels``, ``max_pixels``, ``dct_scaling``,
    ``idct`` mean what they mean for a Pipeline (``idct="fast"``: the inverse DCT of
    ``tf.io.decode_jpeg``'s default, for bit-equal decodes); the chain is validated here (ValueError) and
    packed into the op's ``ops`` attribute (exact float64 bytes, so the graph is
    self-contained).  ``seed``: non-negative int below 2**63.  ``num_threads``: the
    op's own native threads (0: one per usable CPU).

    For image files on a local or mounted file system, :func:`decode_augment_files`
    does the same from the paths and reads the files itself, which saves tf.data one
    ``read_file`` element per image.
    """
    return _decode_augment("decode_augment", "bytes", encoded, index, ops=ops, seed=seed, epoch=epoch, dtype=dtype,
                           layout=layout, channels=channels, max_pixels=max_pixels, dct_scaling=dct_scaling,
                           on_error=on_error, num_threads=num_threads, name=name, idct=idct)


def decode_augment_files(paths: Any, index: Any, *, ops: Any, seed: int = 0, epoch: Any = 0, dtype: Any = "uint8",
                         layout: str = "NHWC", channels: Union[int, str] = 3, max_pixels: Optional[int] = None,
                         dct_scaling: bool = True, on_error: str = "raise", num_threads: int = 0,
                         name: Optional[str] = None, idct: str = "accurate") -> Any:
    """:func:`decode_augment` on a batch of image files: ``paths`` string[B] (file
    paths, read by the op's native threads as a Pipeline over ``sources.Files``
    reads them), ``index`` int64[B].  Row r is the Pipeline's sample for (seed,
    epoch, index[r]), bit for bit, as with :func:`decode_augment`::

        ds = (tf.data.Dataset.from_tensor_slices((paths, tf.range(n, dtype=tf.int64)))
              .shuffle(n).batch(256)
              .map(lambda p, i: (fqt.decode_augment_files(p, i, ops=chain, seed=7, epoch=0), i),
                   num_parallel_calls=2)
              .prefetch(1))

    One tf.data element per batch instead of one ``read_file`` per image: on the
    reference task this path runs at the speed of ``fastq.tf.dataset`` (see
    docs/tensorflow.md), where ``read_file`` + ``batch`` + :func:`decode_augment`
    costs tf.data's per-element overhead on every image.  An unreadable file (missing,
    not a regular file, empty) fails like a corrupt one, under ``on_error``, with an
    error naming its index and path.  The paths are opened by the process that runs
    the op: under tf.data service that is the worker, which must see the same files.
    """
    return _decode_augment("decode_augment_files", "files", paths, index, ops=ops, seed=seed, epoch=epoch,
                           dtype=dtype, layout=layout, channels=channels, max_pixels=max_pixels,
                           dct_scaling=dct_scaling, on_error=on_error, num_threads=num_threads, name=name, idct=idct)


def _decode_augment(who: str, source: str, encoded: Any, index: Any, *, ops: Any, seed: int, epoch: Any, dtype: Any,
                    layout: str, channels: Union[int, str], max_pixels: Optional[int], dct_scaling: bool,
                    on_error: str, num_threads: int, name: Optional[str], idct: str = "accurate") -> Any:
    tf = _tf()
    if on_error not in ("raise", "skip"):
        raise ValueError(f"{who}: on_error must be 'raise' or 'skip', got {on_error!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2 ** 63:
        raise ValueError(f"{who}: seed must be an int in [0, 2**63), got {seed!r}")
    if isinstance(num_threads, bool) or not isinstance(num_threads, (int, np.integer)) or not 0 <= num_threads <= 1024:
        raise ValueError(f"{who}: num_threads must be an int in [0, 1024], got {num_threads!r}")
    attrs = _op_attrs(ops, dtype, layout, channels, max_pixels, dct_scaling, idct)
    mod = load()
    what = "encoded must be a string tensor (encoded image bytes)" if source == "bytes" else \
        "paths must be a string tensor (file paths)"
    if source == "files" and isinstance(encoded, (list, tuple)):
        encoded = [os.fspath(p) if isinstance(p, os.PathLike) else p for p in encoded]
    encoded = tf.convert_to_tensor(encoded)
    if encoded.dtype != tf.string:
        raise TypeError(f"{who}: {what}, got {encoded.dtype.name}")
    index = tf.convert_to_tensor(index, dtype_hint=tf.int64)
    if index.dtype != tf.int64:
        raise TypeError(f"{who}: index must be an int64 tensor, got {index.dtype.name} "
                        f"(tf.cast(index, tf.int64))")
    epoch = tf.convert_to_tensor(epoch, dtype_hint=tf.int64)
    if epoch.dtype != tf.int64:
        epoch = tf.cast(epoch, tf.int64)
    images, ok = mod.fastq_decode_augment(encoded, index, epoch, seed=int(seed), on_error=on_error,
                                          num_threads=int(num_threads), source=source, name=name, **attrs)
    return (images, ok) if on_error == "skip" else images


# -- normalize on the accelerator, exactly as fastq's Normalize --------------------

Floats = Optional[Union[float, Sequence[float]]]


def table_as(table: np.ndarray, dtype: Any) -> np.ndarray:
    """A float32 normalize table (:func:`fastq.ops.normalize_table`) in `dtype`: float16 /
    bfloat16 from the float32 value, round to nearest even, as csrc writes them."""
    from fastq import ops as fops
    name = fops.dtype_name(dtype, "normalize_table")
    if name == "float32":
        return table
    if name == "float16":
        return table.astype(np.float16)
    if name == "bfloat16":
        from fastq._native import _image
        return table.astype(_image.numpy_dtype("bfloat16"))
    raise ValueError(f"normalize_table: dtype must be a float dtype, got {name}")


def normalize_table(mean: Floats = None, std: Floats = None,
                    max_pixel_value: float = 255.0, dtype: Any = "float32") -> np.ndarray:
    """The ``(3, 256)`` table fastq's Normalize writes from: ``(v / 255 - mean[c]) /
    std[c]`` computed in float64 and rounded once to float32 (then to float16 /
    bfloat16 from the float32 value, round to nearest even), as csrc builds it
    (:func:`fastq.ops.normalize_table`)."""
    from fastq import ops as fops
    n = fops.Normalize(fops.IMAGENET_MEAN if mean is None else mean, fops.IMAGENET_STD if std is None else std,
                       max_pixel_value=max_pixel_value)
    return table_as(fops.normalize_table(n), dtype)


def gather_table(images: Any, table: np.ndarray, axis: int) -> Any:
    """``table[c][images]`` for the channel ``c`` on `axis` (>= 0) of a uint8 tensor
    (1-channel images use row 0): one ``tf.gather``, on whatever device the images are."""
    tf = _tf()
    c = images.shape[axis]
    if c not in (1, 3):
        raise ValueError(f"normalize: images need 1 or 3 channels on axis {axis}, got shape {images.shape}")
    flat = tf.constant(table[:c].reshape(-1))
    offs = np.arange(c, dtype=np.int32) * 256
    rank = len(images.shape)
    if axis != rank - 1:  # channels before H, W (NCHW): broadcast over them
        offs = offs.reshape((c,) + (1,) * (rank - 1 - axis))
    return tf.gather(flat, tf.cast(images, tf.int32) + tf.constant(offs))


def normalize(images: Any, mean: Floats = None, std: Floats = None,
              *, max_pixel_value: float = 255.0, dtype: Any = "float32", layout: str = "NHWC") -> Any:
    """uint8 images -> float, bit for bit what fastq's ``Normalize(mean, std,
    max_pixel_value)`` writes (a per-channel table lookup; runs on whatever device
    ``images`` is on, e.g. the GPU after the batch arrived as uint8).  ``layout``:
    where the channel axis is (NHWC: last; NCHW: axis 1); 1-channel images use
    channel 0's mean/std, as fastq does."""
    tf = _tf()
    table = normalize_table(mean, std, max_pixel_value, dtype)
    images = tf.convert_to_tensor(images)
    if images.dtype != tf.uint8:
        raise TypeError(f"normalize: images must be uint8, got {images.dtype.name}")
    lay = layout.upper()
    if lay not in ("NHWC", "NCHW", "HWC", "CHW"):
        raise ValueError(f"normalize: layout must be NHWC or NCHW, got {layout!r}")
    return gather_table(images, table, len(images.shape) - 1 if lay in ("NHWC", "HWC") else len(images.shape) - 3)


def _normalize_layer_class():
    import keras

    class NormalizeLayer(keras.layers.Layer):
        """A Keras layer: uint8 images in, :func:`normalize` out (fastq's Normalize, bit
        for bit).  Put it first in the model so the batch travels as uint8."""

        def __init__(self, mean=None, std=None, max_pixel_value=255.0, out_dtype="float32", layout="NHWC", **kw):
            super().__init__(**kw)
            self.mean, self.std, self.max_pixel_value = mean, std, max_pixel_value
            self.out_dtype, self.layout = out_dtype, layout

        def call(self, images):
            return normalize(images, self.mean, self.std, max_pixel_value=self.max_pixel_value,
                             dtype=self.out_dtype, layout=self.layout)

        def get_config(self):
            cfg = super().get_config()
            cfg.update(mean=self.mean, std=self.std, max_pixel_value=self.max_pixel_value,
                       out_dtype=self.out_dtype, layout=self.layout)
            return cfg

    NormalizeLayer.__module__ = __name__
    return NormalizeLayer


def __getattr__(name: str) -> Any:
    if name == "NormalizeLayer":  # keras imported only when used
        cls = _LOADED.get("NormalizeLayer")
        if cls is None:
            cls = _LOADED["NormalizeLayer"] = _normalize_layer_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _main(argv=None) -> int:
    """``python -m fastq.tf.ops``: build (or find) the kernel for the installed TF."""
    import argparse
    p = argparse.ArgumentParser(prog="python -m fastq.tf.ops", description=_main.__doc__)
    p.add_argument("--force", action="store_true", help="rebuild even if cached")
    a = p.parse_args(argv)
    try:
        path = build(force=a.force, verbose=True)
        load()
    except KernelBuildError as e:
        print(f"fastq.tf.ops: error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
