"""The framework-neutral part of a translation: what each of the user's steps became
(:class:`Step`), the native chain, the steps left to Python, the output a framework
expects, and the :class:`Translation` that builds a :class:`fastq.Pipeline` from them.

A framework module (``fastq.translate.torchvision``, ``.timm``, ``.keras``,
``.tensorpack``) walks the user's pipeline and gives one :class:`Step` per step.  The
first step that does not translate, and every step after it, runs in Python
(``python_steps``): the native chain before it (``ops``) produces each sample, and
``tail`` (a framework-specific function) turns that sample into what the remaining
steps would have received and runs them.  ``strict=True`` refuses such a step instead.
"""
import random
import time
import warnings
import zlib
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from fastq.pipeline import Pipeline

__all__ = ["Step", "Translation", "NotTranslatable", "TranslationError"]


class TranslationError(ValueError):
    """A step that fastq cannot run exactly, with ``strict=True`` (or where no Python
    fallback is possible); the message names the step and the reason."""


class NotTranslatable(Exception):
    """Raised by a framework's step translator: the step (or one of its argument
    values) has no exact native equivalent.  ``reason`` says which argument or value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def describe(obj: Any, limit: int = 90) -> str:
    """A one-line description of a user's step: ``repr`` when it is short and says more
    than the class name, else the class name."""
    name = type(obj).__name__
    try:
        r = repr(obj)
    except Exception:  # a user's class whose repr fails
        return name
    r = " ".join(r.split())
    if r.startswith("<") or not r:
        return name
    return r if len(r) <= limit else r[:limit - 3] + "..."


class Step:
    """One of the user's steps and what it became.

    ``original``: the user's object; ``name``: its description; ``ops``: the native ops
    it became (empty for a step that only sets the output, such as ToTensor);
    ``becomes``: in words, what it became (the ops with their parameters, or the output
    setting); ``python``: True when it runs in Python (the first untranslatable step and
    every step after it); ``reason``: why the first one did not translate."""

    __slots__ = ("original", "name", "ops", "becomes", "python", "reason")

    def __init__(self, original: Any, ops: Sequence[Any] = (), becomes: str = "", *, python: bool = False,
                 reason: str = "", name: Optional[str] = None) -> None:
        self.original = original
        self.name = name or describe(original)
        self.ops = list(ops)
        self.becomes = becomes or (", ".join(op_text(o) for o in self.ops) if self.ops else "(nothing to do)")
        self.python = python
        self.reason = reason

    def __repr__(self) -> str:
        return f"Step({self.name!r} -> {'python' if self.python else self.becomes!r})"


def op_text(op: Any) -> str:
    """An op with its parameters: ``Resize(shorter_side=256, interpolation='bilinear')``."""
    params = getattr(op, "__dict__", {})
    parts = [f"{k}={v!r}" for k, v in params.items() if not k.startswith("_") and v is not None]
    return f"{type(op).__name__}({', '.join(parts)})"


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """A 32-bit seed for a sample's Python steps, a function of (seed, epoch, index) alone,
    so the Python tail is as reproducible as the native chain (any number of workers)."""
    return zlib.crc32(np.asarray([seed, epoch, index], dtype=np.int64).tobytes()) & 0x7FFFFFFF


class Translation:
    """A user's pipeline translated to fastq.

    Attributes
    ----------
    framework : str
        "torchvision", "timm", "keras" or "tensorpack".
    steps : list of Step
        One row per original step, in order: what it became.
    ops : list
        The native chain (fastq.ops), the whole pipeline when ``python_steps`` is empty.
    python_steps : list of str
        The steps that run in Python, per sample (empty: fully native).
    options : dict
        The Pipeline options that give the framework's output (dtype, layout, channels,
        dct_scaling...).
    tail : callable or None
        ``tail(image, label) -> (output, label)``: runs the Python steps on one
        sample of the native chain's output (``image`` a numpy array in the form given by
        ``prefix_options``); None when fully native.
    prefix_options : dict
        The Pipeline options of the native prefix when a tail runs (e.g. uint8 NHWC).
    """

    def __init__(self, framework: str, steps: Sequence[Step], options: Dict[str, Any], *,
                 tail: Optional[Callable[..., Any]] = None, prefix_options: Optional[Dict[str, Any]] = None,
                 notes: Sequence[str] = ()) -> None:
        self.framework = framework
        self.steps = list(steps)
        self.ops = [op for s in self.steps if not s.python for op in s.ops]
        self.python_steps = [s.name for s in self.steps if s.python]
        self.options = dict(options)
        self.tail = tail
        self.prefix_options = dict(prefix_options or {})
        self.notes = list(notes)
        if self.python_steps and tail is None:
            raise TranslationError(f"{framework}: steps {self.python_steps} run in Python but no tail was given")

    @property
    def native(self) -> bool:
        """True when every step runs natively."""
        return not self.python_steps

    def __str__(self) -> str:
        rows = [(s.name, ("Python: " + (s.reason or "after an untranslated step")) if s.python else s.becomes)
                for s in self.steps]
        w = min(max([len(r[0]) for r in rows] + [len("step")]), 60)
        lines = [f"fastq translation of a {self.framework} pipeline "
                 f"({'fully native' if self.native else f'{len(self.python_steps)} step(s) in Python'})",
                 f"{'step':<{w}}  becomes", f"{'-' * w}  {'-' * 40}"]
        for name, becomes in rows:
            lines.append(f"{name:<{w}}  {becomes}")
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        lines.append(f"output: {opts}")
        lines.extend(self.notes)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<Translation {self.framework}: {len(self.ops)} native ops, "
                f"{len(self.python_steps)} Python steps>")

    def pipeline(self, source: Any, batch_size: int, **kw: Any):
        """A :class:`fastq.Pipeline` over ``source`` whose batches are the framework's:
        its dtype, layout, value range and channel order.  Keywords go to the Pipeline
        (``shuffle``, ``seed``, ``workers``, ``drop_remainder``...) and override the
        translation's own options."""
        if self.native:
            opts = dict(self.options)
            opts.update(kw)
            return Pipeline(source, batch_size=batch_size, ops=list(self.ops), **opts)
        return _tail_pipeline(self, source, batch_size, kw)


# ---- the Python tail --------------------------------------------------------------------

_PIPELINE_ONLY = ("queue_size", "drop_remainder", "stall_timeout", "pin_memory", "worker_priority")


def _tail_pipeline(tr: Translation, source: Any, batch_size: int, kw: Dict[str, Any]):
    """A Pipeline whose one Python thread takes the native prefix's samples in order, runs
    the tail on each, and writes the result into the ring (fastq.sources.Iterable)."""
    from fastq.sources.iterable import Iterable
    outer = {k: kw.pop(k) for k in list(kw) if k in _PIPELINE_ONLY}
    for k in ("dtype", "layout", "channels"):  # the output's form is the tail's, not the prefix's
        kw.pop(k, None)
    inner_opts = dict(tr.prefix_options)
    inner_opts.update(kw)
    inner_opts["return_index"] = True
    seed = int(inner_opts.get("seed", 0) or 0)
    drop = outer.get("drop_remainder", True)
    inner = Pipeline(source, batch_size=batch_size, ops=list(tr.ops), drop_remainder=drop, **inner_opts)
    assert tr.tail is not None  # Translation.__init__ refuses Python steps without a tail
    feed = _TailFeed(inner, tr.tail, seed)
    pipe = _TranslatedPipeline(Iterable(feed), batch_size=batch_size, workers=1, **outer)
    pipe._translation = tr
    pipe._feed = feed
    return pipe


class _TailFeed:
    """Iterates the native prefix, one epoch per ``iter()``, and yields each sample after
    the Python tail.  The global ``random``, ``numpy.random`` and ``torch`` generators are
    seeded per sample from (seed, epoch, index) and restored afterwards, so the Python
    steps give the same output for any number of native workers and after a resume."""

    def __init__(self, inner: Any, tail: Callable[..., Any], seed: int) -> None:
        self.inner = inner
        self.tail = tail
        self.seed = seed
        self.seconds = 0.0
        self.samples = 0

    def __len__(self) -> int:
        return len(self.inner) * self.inner.batch_size if self.inner.drop_remainder else self.inner._num_samples()

    def __iter__(self):
        epoch = self.inner.epoch
        for batch in self.inner:
            # (images, labels, index) or, with pad="batch", (images, labels, index, image_sizes)
            padded = self.inner._batch_pad is not None
            images, labels = batch[0], batch[1]
            index, sizes = (batch[-2], batch[-1]) if padded else (batch[-1], None)
            for r in range(len(index)):
                img = images[r] if sizes is None else images[r, :sizes[r][0], :sizes[r][1]]
                t0 = time.perf_counter()
                with _seeded(sample_seed(self.seed, epoch, int(index[r]))):
                    out = self.tail(np.array(img), labels[r])
                self.seconds += time.perf_counter() - t0
                self.samples += 1
                yield out
            del images, labels, index, sizes, batch


class _seeded:
    """Seed Python's, numpy's global and torch's generators for one sample; restore them."""

    def __init__(self, s: int) -> None:
        self.s = s

    def __enter__(self):
        import sys
        self.py = random.getstate()
        self.np = np.random.get_state()
        random.seed(self.s)
        np.random.seed(self.s)
        self.torch = sys.modules.get("torch")
        if self.torch is not None:
            self.t = self.torch.random.get_rng_state()
            self.torch.manual_seed(self.s)
        return self

    def __exit__(self, *exc):
        random.setstate(self.py)
        np.random.set_state(self.np)
        if self.torch is not None:
            self.torch.random.set_rng_state(self.t)
        return False


class _TranslatedPipeline(Pipeline):
    """A Pipeline whose samples pass through Python steps; ``stats()["translation"]``
    says which steps and what they cost (seconds with the GIL held, per sample), and
    holds the native prefix's own stats."""

    _translation: Translation
    _feed: _TailFeed

    def stats(self) -> Dict[str, Any]:
        out = super().stats()
        f = self._feed
        out["translation"] = {
            "framework": self._translation.framework,
            "python_steps": list(self._translation.python_steps),
            "python_samples": f.samples,
            "python_seconds": f.seconds,
            "python_us_per_sample": (1e6 * f.seconds / f.samples) if f.samples else None,
            "native": f.inner.stats(),
        }
        return out

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._feed.inner.close()


def python_step_warning(framework: str, step: Step) -> None:
    """The one warning for a step that runs in Python (named, with the reason)."""
    warnings.warn(f"fastq.{framework}: {step.name} does not translate ({step.reason}); it and the steps after it "
                  f"run in Python per sample (strict=True raises instead)", UserWarning, stacklevel=3)


def split_at_first_python(framework: str, steps: List[Step], strict: bool) -> List[Step]:
    """Mark the first untranslated step and everything after it as Python; warn once
    naming it, or raise with ``strict``."""
    out: List[Step] = []
    first = None
    for s in steps:
        if first is None and s.python:
            first = s
        elif first is not None and not s.python:
            s = Step(s.original, python=True, name=s.name, reason="after an untranslated step")
        out.append(s)
    if first is not None:
        if strict:
            raise TranslationError(f"fastq.{framework}: {first.name} does not translate: {first.reason}")
        python_step_warning(framework, first)
    return out
