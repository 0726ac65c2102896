"""fastq.Pipeline: batches from a source, produced into a native slot ring.

Lifetime of a batch
-------------------
Each batch is a tuple of numpy arrays that *view* one slot of the ring (no
copy).  All arrays of a batch share one ``Lease`` object as their ``base``;
the slot goes back to the producers when the last reference to any of them
dies (``del batch``, a TF tensor that aliased it being freed, ...).  Keep a
batch longer than that by copying it (``np.array(x)``).  Any free slot takes
the next batch, so each batch your code keeps reduces the read-ahead by one:
the producers keep working while the consumer side holds fewer than
``queue_size`` batches.  A ``for`` loop variable counts (it still holds the
previous batch while the next one is fetched), so a loop that keeps k batches
needs ``queue_size >= k + 2``.  If the consumer side holds all ``queue_size``
batches the producers have nowhere to write: the consumer then raises
:class:`fastq.errors.StalledError` (saying how many batches it holds) after
``stall_timeout`` seconds instead of hanging.

``close()`` drops the pipeline's reference to the slot memory (one arena for
all slots): it is freed as soon as no batch of it is referenced any more.
Batches still referenced after ``close()`` stay valid; they keep the whole
arena alive until the last of them is dropped.

Fork
----
A forked child cannot use its parent's pipeline: iterating it or calling
``stats()`` raises :class:`fastq.errors.ForkedPipelineError`; ``close()`` and
the cleanup at exit are silent no-ops there, and never touch the parent's
locks.

Threads
-------
A Pipeline object is meant to be driven by one consumer thread at a time.
Its batches (arrays) may be handed to and released from any thread.
"""
import difflib
import numbers
import os
import re
import threading
import time
import weakref
from typing import Any, Dict, Iterator, List, Literal, Mapping, Optional, Tuple, Union

import numpy as np

from fastq._native import _core
from fastq.errors import ForkedPipelineError, PipelineClosedError, SupersededIterationError
from fastq.sources.base import Source
from fastq.backend import BackendConfig
from fastq.sources.images import IMAGE_OPTIONS, ImageSource, _ImageBackend, image_options_doc
from fastq.sources import Iterable

__all__ = ["Pipeline", "Batch"]

Batch = Tuple[np.ndarray, ...]  # one batch: a numpy view of a slot per output


_PIPELINE_ARGS = ("source", "batch_size", "queue_size", "workers", "drop_remainder", "stall_timeout",
                  "pin_memory", "mix", "worker_priority")
_IMAGE_OPTION_NAMES = tuple(name for name, _, _ in IMAGE_OPTIONS)


def _count(name, value, minimum=1):
    """A Python int from an int or numpy integer >= minimum, or a ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def _unknown_option(name, known):
    close = difflib.get_close_matches(name, list(_PIPELINE_ARGS) + list(known), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    options = f"; image source options: {', '.join(known)}" if known else ""
    return TypeError(f"Pipeline() got an unexpected keyword argument {name!r}{hint} "
                     f"(Pipeline arguments: {', '.join(_PIPELINE_ARGS[1:])}{options})")


class _State:
    """Everything close() needs, without a reference back to the Pipeline
    (so that a weakref.finalize can close it at GC or interpreter exit)."""

    def __init__(self):
        self.ring = None
        self.producers = None
        self.closed = False
        self.lock = threading.RLock()
        self.pid = os.getpid()
        self.final_stats = None  # the ring's counters when close() dropped it
        self.last_producer_stats = None  # stats() of the last run's producers, taken when they stopped

    def stop_producers(self):
        prod, self.producers = self.producers, None
        if prod is not None:
            if self.ring is not None:
                self.ring.cancel()
            prod.stop()
            if hasattr(prod, "stats"):
                self.last_producer_stats = prod.stats()

    def close(self):
        if os.getpid() != self.pid:
            # A forked child: the producers, the ring's mutex and even self.lock
            # belong to the parent (a parent thread may have held them at fork).
            return
        with self.lock:
            if self.closed:
                return
            self.closed = True
            try:
                self.stop_producers()
            finally:
                ring, self.ring = self.ring, None
                if ring is not None:
                    ring.close()
                    try:
                        self.final_stats = ring.stats()
                    except Exception:  # noqa: BLE001 - stats are informative only
                        self.final_stats = None
                # `ring` dies here unless a batch (Lease) still references it;
                # the arena is freed with the last reference.


class Pipeline:
    """Batches of samples produced by native (or Python) workers into a
    bounded ring of ``queue_size`` batch slots.

    Parameters
    ----------
    source : fastq.sources.Source or any iterable
        A plain iterable is wrapped in :class:`fastq.sources.Iterable`.
    batch_size : int
        Rows per batch.
    queue_size : int
        Number of batch slots (a bounded queue of whole batches; tensorpack's
        ``QueueInput`` queued 50 single datapoints instead).  Producers wait
        when all are full.  At least 2: a ``for batch in pipe:`` loop still
        holds its previous batch while it asks for the next one.
    workers : int, optional
        Producer threads.  Default for native sources: the usable CPUs that
        ``worker_priority`` leaves to the workers (all of them below 8 CPUs; from
        8 on, all but one physical core); 2 Python threads for an iterable source.
    worker_priority : "background", "normal" or fastq.WorkerPriority
        How native workers share the CPUs with your training loop (fastq.scheduling).
        "background" (default): ``SCHED_BATCH`` at nice +19, and from 8 usable
        CPUs on one physical core kept free for the training thread, so the
        workers use the CPU time the training loop leaves instead of slowing it.
        "normal": workers at normal priority on every CPU (a preprocessing-only
        machine, or benchmarking fastq alone).  What was applied:
        ``stats()["scheduling"]``.
    drop_remainder : bool
        Drop a final partial batch (default) or deliver it with fewer rows.
    stall_timeout : float
        Seconds the consumer may find every slot leased before raising
        StalledError (negative: wait forever).
    pin_memory : "auto", True or False
        Register the slot memory as pinned (page-locked) host memory with the
        CUDA runtime so host-to-device copies are fast and asynchronous.
        "auto" pins when a CUDA runtime can be loaded and says why not in
        ``stats()`` otherwise; True makes that a PinMemoryError.
    mix : fastq.MixUpCutMix, optional
        Batch-level MixUp / CutMix (see fastq.mix): mixes each batch in place
        when the consumer takes it; the labels output becomes float32 soft
        labels of shape (num_classes,).  :meth:`explain_batch` gives the draws.

    Options of the native image sources (Files, Bytes, Arrays), passed as more
    keywords (a Python iterable source takes none of them):

{image_options}

    Iterating the pipeline runs one epoch; iterating again runs the next.
    ``len(pipeline)`` is the number of batches per epoch (see :meth:`__len__`).
    Use it as a context manager, or call :meth:`close`.
    """

    # fastq.tf.dataset: which feed serves it (stats()["tf_feed"]) and the native op's registration
    _tf_feed: Optional[Dict[str, Any]] = None
    _tf_feed_id: Optional[int] = None

    def __init__(self, source: Any, *, batch_size: int, queue_size: int = 4, workers: Optional[int] = None,
                 drop_remainder: bool = True, stall_timeout: float = 60.0, pin_memory: Union[str, bool] = "auto",
                 mix: Any = None, worker_priority: Any = "background", **source_options: Any) -> None:
        batch_size = _count("batch_size", batch_size)
        queue_size = _count("queue_size", queue_size)
        if queue_size < 2:
            raise ValueError(
                "queue_size must be at least 2, got 1: a `for batch in pipe:` loop still holds its previous "
                "batch (the loop variable) while it waits for the next one, so with one slot the producers "
                "could never write the next batch and the loop would stall")
        if workers is not None:
            workers = _count("workers", workers)
        if mix is not None:
            from fastq.mix import MixUpCutMix
            if not isinstance(mix, MixUpCutMix):
                raise TypeError(f"mix must be a fastq.MixUpCutMix (or fastq.MixUp / fastq.CutMix), got "
                                f"{type(mix).__name__}")
        if pin_memory not in ("auto", True, False):
            raise ValueError(f"pin_memory must be 'auto', True or False, got {pin_memory!r}")
        from fastq.scheduling import resolve as _resolve_priority
        self._scheduling = _resolve_priority(worker_priority)
        self.worker_priority = worker_priority
        if not isinstance(source, Source):
            source = Iterable(source)
        # the standard image backend's options are IMAGE_OPTIONS; an iterable takes none of them
        if isinstance(source, Iterable) or (isinstance(source, ImageSource) and
                                            type(source)._make_backend is ImageSource._make_backend):
            for name in source_options:
                if name not in _IMAGE_OPTION_NAMES:
                    raise _unknown_option(name, _IMAGE_OPTION_NAMES)
        self.batch_size = batch_size
        self.queue_size = queue_size
        self.workers = workers
        self.drop_remainder = bool(drop_remainder)
        self.stall_timeout = float(stall_timeout)
        self.pin_memory = pin_memory
        self._pin_status = {"pinned": None, "pin_reason": "not allocated yet (with the first batch)"}
        self.source = source
        try:
            self._backend = source._make_backend(
                BackendConfig(batch_size=batch_size, drop_remainder=self.drop_remainder, workers=workers,
                              scheduling=self._scheduling),
                **source_options)
        except TypeError as e:
            # another source's backend: name the Pipeline argument, not a private class
            m = re.search(r"unexpected keyword argument '(\w+)'", str(e))
            if m is None or m.group(1) not in source_options:
                raise
            raise _unknown_option(m.group(1), ()) from None
        n = self._batches_per_epoch()
        if n == 0 and self.drop_remainder and (self._num_samples() or 0) > 0:
            raise ValueError(
                f"batch_size={batch_size} is larger than the {self._num_samples()} samples of the source and "
                f"drop_remainder=True: every epoch would have 0 batches (model.fit would return without "
                f"training). Use a smaller batch_size or drop_remainder=False.")
        self._state = _State()
        self._finalizer = weakref.finalize(self, _State.close, self._state)
        self._epoch = 0          # next epoch to run
        self._resume_position = 0  # batches to skip in epoch self._epoch (load_state_dict)
        self._active: Optional[_EpochIterator] = None  # the live epoch iterator
        self._pid = os.getpid()
        self._active_s = 0.0     # wall seconds of finished epoch iterations (stats()["stages"])
        # pad="batch" (fastq.batchpad): the consumer repacks each batch to its own size
        self._batch_pad = getattr(self._backend, "batch_pad", None)
        if self._batch_pad is not None and mix is not None:
            raise ValueError("pad='batch' does not take mix= (MixUp / CutMix mix images of one size)")
        self.mix = mix
        self._mix = None  # the bound fastq.mix._BoundMix (native image sources: now; others: at first use)
        if mix is not None and isinstance(self._backend, _ImageBackend):
            self._mixer()

    def _mixer(self):
        """The MixUp/CutMix bound to the backend (None without mix)."""
        if self.mix is not None and self._mix is None:
            from fastq.mix import _BoundMix
            self._mix = _BoundMix(self.mix, self._backend, self.batch_size,
                                  native=isinstance(self._backend, _ImageBackend))
        return self._mix

    # -- introspection ----------------------------------------------------
    def _num_samples(self):
        """Samples per epoch, or None when the source does not say."""
        src = self.source
        obj = src.obj if isinstance(src, Iterable) else src
        try:
            n = len(obj)
        except (TypeError, NotImplementedError):
            return None
        return n if isinstance(n, numbers.Integral) and n >= 0 else None

    def _batches_per_epoch(self):
        n = self._backend.batches_per_epoch()
        if n is not None:
            return int(n)
        n = self._num_samples()
        if n is None:
            return None
        return n // self.batch_size if self.drop_remainder else -(-n // self.batch_size)

    def __bool__(self) -> bool:
        return True  # not len(): a Pipeline is never "empty-false"

    def __len__(self) -> int:
        """Batches per epoch.

        Native sources (Files, Bytes, Arrays, and their shards) know it exactly.
        An iterable source whose object has ``__len__`` (a list, a tensorpack
        DataFlow with a size) counts ``len(obj)`` samples: that number is trusted,
        and with ``fastq.tf.dataset`` it becomes the dataset's cardinality, which
        TensorFlow checks (an iterable that yields another number of samples then
        fails at the end of the epoch with "expected to contain N elements").  An
        iterable without a length has no ``len()``: TypeError.
        """
        n = self._batches_per_epoch()
        if n is None:
            raise TypeError(
                f"len() of this Pipeline is unknown: its source ({type(self.source.obj).__name__} in "
                f"fastq.sources.Iterable) has no __len__, so the number of batches per epoch is only "
                f"known at the end of the epoch")
        return n

    @property
    def output_spec(self) -> List[Tuple[Tuple[int, ...], np.dtype]]:
        """List of (per-sample shape, numpy dtype), one per output (with ``mix``:
        the labels output is float32 of shape (num_classes,); with ``pad="batch"``
        the height and width of the images and masks are None)."""
        specs = self._backend.output_spec()
        mixer = self._mixer()
        if self._batch_pad is not None:  # pad="batch": None for the images' (and masks') height, width
            return self._batch_pad.public_spec(specs)
        return mixer.public_spec(specs) if mixer is not None else specs

    @property
    def output_names(self) -> Optional[List[str]]:
        """One name per output ("images", "labels", a TFRecord feature's key, "boxes",
        "classes", "num_boxes", "image_info", "keypoints", "masks", "instance_masks",
        "index", "image_sizes"), or None
        for a source that does not name its outputs (a Python iterable)."""
        names = getattr(self._backend, "output_names", None)
        return list(names()) if names is not None else None

    @property
    def epoch(self) -> int:
        """The epoch the next ``iter()`` will run."""
        return self._epoch

    def stats(self) -> Dict[str, Any]:
        """Counters: ring slot states, waits, batches/samples delivered,
        plus the source's own (e.g. skipped samples), ``stages``: time per
        stage, who waits on whom, and a verdict (see fastq.stages), and ``cpu``:
        which CPU-specific kernels run and the FASTQ_CPU mask in effect
        (fastq._native._image.cpu_dispatch())."""
        self._check_pid()
        out = {"epoch": self._epoch, "workers": self._effective_workers(), "closed": self._state.closed}
        out.update(self._pin_status)
        ring = self._state.ring
        if ring is not None:
            out.update(ring.stats())
        elif self._state.final_stats is not None:  # closed: the counters at close()
            out.update(self._state.final_stats)
        else:
            out.update({"queue_size": self.queue_size, "batch_size": self.batch_size})
        out.update(self._backend.stats())
        if self._tf_feed:  # fastq.tf.dataset: which feed, and why (fastq/tf/_dataset.py)
            out["tf_feed"] = dict(self._tf_feed)
        prod = self._state.producers
        if prod is not None and hasattr(prod, "stats"):
            out["producers"] = prod.stats()
        elif self._state.last_producer_stats is not None:
            out["producers"] = self._state.last_producer_stats
        if getattr(self._backend, "scheduled", False):  # native workers: what they applied
            out["scheduling"] = self._scheduling.describe(out.get("producers"))
        it = self._active
        t0 = it._t0 if it is not None and not it._done else None  # read once: the consumer thread may
        active_s = self._active_s + (time.monotonic() - t0 if t0 is not None else 0.0)  # stop the clock meanwhile
        from fastq.stages import stage_report
        out["stages"] = stage_report(out, active_s)
        try:
            from fastq._native import _image
        except ImportError:  # a build without the image module: no image kernels either
            pass
        else:
            out["cpu"] = _image.cpu_dispatch()
        return out

    # -- epochs, resuming, replaying ----------------------------------------
    def repeat(self, epochs: Optional[int] = None) -> Iterator[Batch]:
        """Iterate over `epochs` epochs (forever if None), one after another."""
        e = 0
        while epochs is None or e < epochs:
            n = 0
            it = iter(self)
            try:
                for batch in it:
                    n += 1
                    yield batch
                    del batch
            finally:
                it.close()  # a generator closed mid-epoch stops that epoch's producers
            if n == 0 and epochs is None:
                raise ValueError("Pipeline.repeat(): an epoch produced no batch; refusing to loop forever")
            e += 1

    def state_dict(self) -> Dict[str, Any]:
        """Where the pipeline is: the epoch being read and how many of its
        batches the consumer has taken.  A pipeline built the same way and
        given this dict by :meth:`load_state_dict` produces exactly the
        batches this one would produce next."""
        it = self._active
        if it is not None and not it._done:
            epoch, position = it.epoch, it.position
        else:
            epoch, position = self._epoch, self._resume_position
        sd = {"epoch": int(epoch), "position": int(position), "batch_size": self.batch_size,
              "drop_remainder": self.drop_remainder}
        return sd

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume at state["epoch"], skipping its first state["position"] batches
        (applies to the next ``iter()``)."""
        n_batches = self._backend.batches_per_epoch()
        if n_batches is None:
            raise TypeError("state_dict()/load_state_dict() need a native source (Files, Bytes, Arrays); "
                            "a Python iterable cannot be rewound to a position")
        for key in ("batch_size", "drop_remainder"):
            if key in state and state[key] != getattr(self, key):
                raise ValueError(f"state was saved with {key}={state[key]!r}, this pipeline has "
                                 f"{getattr(self, key)!r}")
        epoch, position = int(state["epoch"]), int(state["position"])
        if epoch < 0 or position < 0 or position > n_batches:
            raise ValueError(f"bad state: epoch {epoch}, position {position}")
        with self._state.lock:
            if self._active is not None:
                self._active._supersede()
                self._active = None
            self._state.stop_producers()
            self._epoch = epoch
            self._resume_position = position

    def explain(self, epoch: int, index: int) -> Dict[str, Any]:
        """What was sampled for dataset sample `index` in `epoch` (crop box,
        flips, jitter factors, affine matrix, decode scale...), so the
        augmentation can be replayed with another library."""
        return self._backend.explain(int(epoch), int(index))

    def explain_batch(self, epoch: int, batch_index: int) -> Dict[str, Any]:
        """What ``mix`` draws for batch `batch_index` of `epoch`: ``mode``
        (None, "mixup" or "cutmix"), ``lam`` (the weight of each row's own image
        and label; CutMix: corrected to the pasted area unless correct_lam=False),
        ``lam_drawn`` (the Beta draw; None for a cutmix_minmax box), ``box`` (CutMix:
        x0, y0, x1, y1, end-exclusive), ``partner`` (row i is mixed with row
        partner[i] = i - 1, torchvision's roll(1); mode="pair": n - 1 - i, timm's
        flip); with mode="elem" or "pair" these are per row or pair in ``draws``
        (docs/mix.md)."""
        mixer = self._mixer()
        if mixer is None:
            raise TypeError("explain_batch() needs a Pipeline built with mix=...")
        epoch, batch_index = int(epoch), int(batch_index)
        rows = self.batch_size
        n = self._num_samples()
        if n is not None:
            nb = self._batches_per_epoch()
            if not 0 <= batch_index < (nb if nb is not None else batch_index + 1):
                raise IndexError(f"batch index {batch_index} out of range [0, {nb})")
            rows = min(self.batch_size, n - batch_index * self.batch_size)
        return mixer.explain(epoch, batch_index, rows)

    def _effective_workers(self):
        return self._backend.workers

    # -- lifecycle --------------------------------------------------------
    def close(self) -> None:
        """Stop the producers, wake every waiter and drop the ring.  The slot
        memory is freed once no batch references it; batches still referenced
        stay valid (and keep it) until they are dropped.  In a forked child
        that never used this pipeline, a no-op."""
        if os.getpid() != self._pid:
            return
        self._state.close()
        release = getattr(self._backend, "release", None)
        if release is not None:
            release()  # e.g. what a remote source fetched ahead for an epoch that will not come
        active, self._active = self._active, None
        if active is not None:
            active._drop_refs()  # a live epoch iterator must not keep the arena

    def _check_pid(self):
        if os.getpid() != self._pid:
            raise ForkedPipelineError(
                f"this fastq pipeline was created in process {self._pid} and cannot be used in a forked "
                f"child (pid {os.getpid()}); create a new Pipeline in the child.")

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:
        self.close()
        return False

    @property
    def closed(self) -> bool:
        return self._state.closed

    def _ensure_ring(self):
        st = self._state
        if st.ring is None:
            specs = self._backend.output_spec()
            mixer = self._mixer()
            if mixer is not None:
                specs = mixer.ring_spec(specs)  # + the soft labels' output, where the producers allow it
            st.ring = _core.Ring(self.queue_size, self.batch_size, [d for _, d in specs],
                                 [s for s, _ in specs], arena_align=4096)
            self._pin(st.ring)
        return st.ring

    def _pin(self, ring):
        if self.pin_memory is False:
            self._pin_status = {"pinned": False, "pin_reason": "pin_memory=False"}
            return
        from fastq.device import cuda
        self._pin_status = cuda.pin_ring(ring, required=self.pin_memory is True)

    def __iter__(self) -> "_EpochIterator":
        return self._begin_epoch(_EpochIterator)

    def _begin_epoch(self, iterator_class: Any) -> "_EpochIterator":
        """iter(self) with the epoch's iterator made by `iterator_class` (_EpochIterator or a
        subclass: fastq.tf's native feed, whose batches a TensorFlow kernel takes from the ring)."""
        st = self._state
        self._check_pid()
        if st.closed:
            raise PipelineClosedError("this Pipeline is closed")
        with st.lock:
            if self._active is not None:
                self._active._supersede()
                self._active = None
            st.stop_producers()
            epoch = self._epoch
            self._epoch += 1
            if not self._backend.discover():
                it = iterator_class(self, None, epoch, None)  # empty source: empty epoch
                it._done = True
                return it
            position, self._resume_position = self._resume_position, 0
            ring = self._ensure_ring()
            run_id = ring.begin_run(self.drop_remainder)
            st.producers = self._backend.start(ring, run_id, epoch, position)
            it = iterator_class(self, ring, epoch, st.producers)
            it.position = position
            self._active = it
            return it


class _EpochIterator:
    """Iterator over one epoch's batches (tuples of numpy arrays)."""

    def __init__(self, pipeline, ring, epoch, producers):
        # A strong reference: `for b in fastq.Pipeline(...)` must keep the
        # pipeline alive for as long as its iterator is used.
        self._p = pipeline
        self._ring = ring
        self.epoch = epoch
        self._producers = producers
        self._done = False
        self._superseded = False
        self.position = 0  # batches of this epoch taken by the consumer
        self._t0 = time.monotonic()

    def _stop_clock(self):
        if not self._done and self._t0 is not None:
            self._p._active_s += time.monotonic() - self._t0
            self._t0 = None

    def __iter__(self):
        return self

    def _drop_refs(self):
        """Forget the ring and producers (so that a finished or abandoned
        iterator the user still references does not keep the slot arena)."""
        self._ring = None
        self._producers = None

    def _supersede(self):
        if not self._done:
            self._stop_clock()
            self._superseded = True
            self._done = True
        self._drop_refs()

    def _finish(self):
        self._stop_clock()
        self._done = True
        p = self._p
        if p._active is self:
            p._active = None
            with p._state.lock:
                if p._state.producers is self._producers:
                    p._state.stop_producers()
        self._drop_refs()

    def __next__(self) -> Batch:
        if self._done:
            if self._superseded:
                raise SupersededIterationError(
                    f"epoch {self.epoch}'s iterator was used after a newer iteration of the same Pipeline "
                    f"started; a Pipeline runs one epoch at a time (create two Pipelines to read twice)")
            raise StopIteration
        p = self._p
        stall = p.stall_timeout
        failure = None
        if self._ring is None:  # the pipeline was closed
            self._done = True
            raise PipelineClosedError("the Pipeline was closed")
        try:
            res = self._ring.next_batch(stall)
        except SupersededIterationError:
            if p.closed:
                self._done = True
                raise PipelineClosedError("the Pipeline was closed while waiting for a batch") from None
            self._finish()
            raise
        except PipelineClosedError:
            self._done = True
            raise
        except Exception as e:  # noqa: BLE001 - re-raised unless it is a sample's error
            if getattr(e, "index", None) is None:  # not about one sample (e.g. StalledError)
                raise
            failure = e
        if failure is not None:
            # A failed sample: its backend may name its file or hand back the
            # user's own exception.  Raised outside the except block so that
            # exception is not chained to the record it was carried by.
            exc = p._backend.sample_error(failure, self._producers)
            self._finish()
            raise exc
        if res is None:
            self._finish()
            raise StopIteration
        batch = res[1]
        mixer = p._mix
        if mixer is not None:
            try:
                batch = mixer.apply(batch, self.epoch, self.position)  # in place, GIL released
            except BaseException:
                del batch, res  # the slot goes back
                self._finish()
                raise
        if p._batch_pad is not None:
            try:
                batch = p._batch_pad.apply(batch)  # in place, GIL released (fastq.batchpad)
            except BaseException:
                del batch, res  # the slot goes back
                self._finish()
                raise
        self.position += 1
        return batch

    def close(self):
        """Abandon the rest of this epoch (producers stop)."""
        if not self._done:
            self._finish()


Pipeline.__doc__ = (Pipeline.__doc__ or "").replace("{image_options}", image_options_doc("    "))
