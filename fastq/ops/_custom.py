"""Custom ops: CustomOp (a C function of your own library) and PyFunc (a Python
function) (csrc/image/api/fq_image_custom.cpp, docs/custom_ops.md), and
:func:`get_include` (public as ``fastq.get_include``), where the C header of CustomOp is."""
import math
import os
from typing import Sequence

from fastq._native import _image
from fastq.ops._base import Op, _K, _fail, _prob

# the public names of this family (fastq.ops re-exports them)
__all__ = ["CustomOp", "PyFunc"]

# the C header of CustomOp's ABI (csrc/image/fastq_custom_op.h; setup.py installs a copy in the
# package's include folder)
HEADER = "fastq_custom_op.h"


def get_include() -> str:
    """The folder that holds ``fastq_custom_op.h``, for ``cc -I``: ``fastq/include`` in an
    installed package, ``csrc/image`` in a source checkout."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # fastq/
    for d in (os.path.join(pkg, "include"), os.path.join(os.path.dirname(pkg), "csrc", "image")):
        if os.path.isfile(os.path.join(d, HEADER)):
            return d
    raise FileNotFoundError(f"{HEADER} is not installed with fastq (looked in {pkg}/include)")


class CustomOp(Op):
    """A C function of your own shared library, run in place on the uint8 HxWxC image
    by the native workers, GIL-free: ``CustomOp(library="/path/libmyop.so",
    symbol="my_op", params=[...], p=1.0)``.  The library implements the ABI of
    ``fastq_custom_op.h`` (in ``fastq.get_include()``); it is loaded with
    ``dlopen(RTLD_NOW | RTLD_LOCAL)`` when a pipeline (an ``ImageSpec``) is created,
    which fails naming the library, the symbol or the ABI version that does not fit
    (:meth:`check` does the same now).  ``params`` (any number of floats) go to
    ``symbol_init`` and to every call.  Applied with probability ``p``; its random
    draws come from the sample's stream (explain: ``rng_key``), so outputs are
    identical for any number of workers.  A non-zero return fails the sample with the
    function's message; the pipeline's ``on_error`` applies."""

    kind = _K["CustomOp"]

    def __init__(self, library, symbol: str, params: Sequence[float] = (), p: float = 1.0) -> None:
        n = "CustomOp"
        try:
            library = os.fspath(library)
        except TypeError:
            _fail(n, "library must be a path", library)
        if not library or (isinstance(library, str) and "\0" in library):
            _fail(n, "library must be a non-empty path", library)
        if not (isinstance(symbol, str) and symbol.isidentifier() and symbol.isascii()):
            _fail(n, "symbol must be a C identifier", symbol)
        try:
            vals = tuple(float(v) for v in params)
        except (TypeError, ValueError):
            _fail(n, "params must be a sequence of numbers", params)
        if not all(math.isfinite(v) for v in vals):
            _fail(n, "params must be finite numbers", params)
        self.library = library
        self.symbol = symbol
        self.params = vals
        self.p = _prob(n, p)

    def fields(self):
        # slot: the op's place in the spec's custom table, set when a spec binds it
        return {"slot": 0, "p": self.p}

    def check(self) -> None:
        """Load the library and check the symbol and its ABI version now (init is not run)."""
        _image.probe_custom(self.library, self.symbol)

    def _key(self):
        return (self.library, self.symbol, self.params, self.p)

    def __eq__(self, other):
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    @classmethod
    def _example(cls):
        return cls("/nonexistent/libmyop.so", "my_op", params=[1.5, -2], p=0.5)


class PyFunc(Op):
    """A Python function run on each sample: ``fn(image, rng)`` with ``image`` a
    writable uint8 HxWxC numpy view of the sample's current pixels (valid only during
    the call) and ``rng`` a ``numpy.random.Generator`` seeded from the sample's
    ``(seed, epoch, index)``; it edits ``image`` in place and returns None, or returns
    a uint8 array of the same shape.  Applied with probability ``p``.  It runs on the
    native worker threads but takes the GIL for each call (a cost: see
    docs/custom_ops.md and benchmarks/bench_pyfunc.py).  An exception fails the sample
    with its traceback in the message; the pipeline's ``on_error`` applies."""

    kind = _K["PyFunc"]

    def __init__(self, fn, p: float = 1.0) -> None:
        if not callable(fn):
            _fail("PyFunc", "fn must be callable", fn)
        self.fn = fn
        self.p = _prob("PyFunc", p)

    @property
    def name(self) -> str:
        return f"PyFunc({getattr(self.fn, '__qualname__', None) or type(self.fn).__name__})"

    def fields(self):
        return {"slot": 0, "p": self.p}

    def __eq__(self, other):
        return type(self) is type(other) and self.fn is other.fn and self.p == other.p

    def __hash__(self):
        return hash((id(self.fn), self.p))

    @classmethod
    def _example(cls):
        return cls(lambda image, rng: None, p=0.5)
