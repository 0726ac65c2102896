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
import os
import threading
import weakref

from fastq import _core
from fastq.errors import ForkedPipelineError, PipelineClosedError, SupersededIterationError
from fastq._source_base import Source
from fastq.sources import Iterable

__all__ = ["Pipeline"]


def _default_workers():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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

    def stop_producers(self):
        prod, self.producers = self.producers, None
        if prod is not None:
            if self.ring is not None:
                self.ring.cancel()
            prod.stop()

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
        Number of batch slots (bounded queue, like tensorpack's
        ``QueueInput(size=...)``).  Producers wait when all are full.
    workers : int, optional
        Producer threads.  Default: number of usable CPU cores for native
        sources, 2 Python threads for an iterable source.
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
    **source_options
        Options of native image sources (see fastq.image_sources): ops, dtype,
        layout, channels, seed, shuffle, on_error, max_pixels, dct_scaling,
        return_index.

    Iterating the pipeline runs one epoch; iterating again runs the next.
    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, source, *, batch_size, queue_size=4, workers=None, drop_remainder=True,
                 stall_timeout=60.0, pin_memory="auto", **source_options):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if isinstance(queue_size, bool) or not isinstance(queue_size, int) or queue_size < 1:
            raise ValueError(f"queue_size must be a positive int, got {queue_size!r}")
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ValueError(f"workers must be a positive int or None, got {workers!r}")
        if pin_memory not in ("auto", True, False):
            raise ValueError(f"pin_memory must be 'auto', True or False, got {pin_memory!r}")
        if not isinstance(source, Source):
            source = Iterable(source)
        self.batch_size = batch_size
        self.queue_size = queue_size
        self.workers = workers
        self.drop_remainder = bool(drop_remainder)
        self.stall_timeout = float(stall_timeout)
        self.pin_memory = pin_memory
        self._pin_status = {"pinned": False, "pin_reason": "the ring is not allocated yet"}
        self.source = source
        self._backend = source._make_backend(self, **source_options)
        self._state = _State()
        self._finalizer = weakref.finalize(self, _State.close, self._state)
        self._epoch = 0          # next epoch to run
        self._resume_position = 0  # batches to skip in epoch self._epoch (load_state_dict)
        self._active = None      # the live epoch iterator
        self._pid = os.getpid()

    # -- introspection ----------------------------------------------------
    @property
    def output_spec(self):
        """List of (per-sample shape, numpy dtype), one per output."""
        return self._backend.output_spec()

    @property
    def epoch(self):
        """The epoch the next ``iter()`` will run."""
        return self._epoch

    def stats(self):
        """Counters: ring slot states, waits, batches/samples delivered,
        plus the source's own (e.g. skipped samples)."""
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
        prod = self._state.producers
        if prod is not None and hasattr(prod, "stats"):
            out["producers"] = prod.stats()
        return out

    # -- epochs, resuming, replaying ----------------------------------------
    def repeat(self, epochs=None):
        """Iterate over `epochs` epochs (forever if None), one after another."""
        e = 0
        while epochs is None or e < epochs:
            n = 0
            for batch in self:
                n += 1
                yield batch
                del batch
            if n == 0 and epochs is None:
                raise ValueError("Pipeline.repeat(): an epoch produced no batch; refusing to loop forever")
            e += 1

    def state_dict(self):
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
        sd.update(getattr(self._backend, "state_extra", lambda: {})())
        return sd

    def load_state_dict(self, state):
        """Resume at state["epoch"], skipping its first state["position"] batches
        (applies to the next ``iter()``)."""
        if not hasattr(self._backend, "batches_per_epoch"):
            raise TypeError("state_dict()/load_state_dict() need a native source (Files, Bytes, Arrays); "
                            "a Python iterable cannot be rewound to a position")
        for key in ("batch_size", "drop_remainder"):
            if key in state and state[key] != getattr(self, key):
                raise ValueError(f"state was saved with {key}={state[key]!r}, this pipeline has "
                                 f"{getattr(self, key)!r}")
        check = getattr(self._backend, "check_state", None)
        if check is not None:
            check(state)
        epoch, position = int(state["epoch"]), int(state["position"])
        if epoch < 0 or position < 0 or position > self._backend.batches_per_epoch():
            raise ValueError(f"bad state: epoch {epoch}, position {position}")
        with self._state.lock:
            if self._active is not None:
                self._active._supersede()
                self._active = None
            self._state.stop_producers()
            self._epoch = epoch
            self._resume_position = position

    def explain(self, epoch, index):
        """What was sampled for dataset sample `index` in `epoch` (crop box,
        flips, jitter factors, affine matrix, decode scale...), so the
        augmentation can be replayed with another library."""
        fn = getattr(self._backend, "explain", None)
        if fn is None:
            raise TypeError("explain() needs a native image source")
        return fn(int(epoch), int(index))

    def _effective_workers(self):
        return getattr(self._backend, "workers", self.workers)

    # -- lifecycle --------------------------------------------------------
    def close(self):
        """Stop the producers, wake every waiter and drop the ring.  The slot
        memory is freed once no batch references it; batches still referenced
        stay valid (and keep it) until they are dropped.  In a forked child
        that never used this pipeline, a no-op."""
        if os.getpid() != self._pid:
            return
        self._state.close()
        active, self._active = self._active, None
        if active is not None:
            active._drop_refs()  # a live epoch iterator must not keep the arena

    def _check_pid(self):
        if os.getpid() != self._pid:
            raise ForkedPipelineError(
                f"this fastq pipeline was created in process {self._pid} and cannot be used in a forked "
                f"child (pid {os.getpid()}); create a new Pipeline in the child.")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def closed(self):
        return self._state.closed

    def _ensure_ring(self):
        st = self._state
        if st.ring is None:
            specs = self._backend.output_spec()
            st.ring = _core.Ring(self.queue_size, self.batch_size, [d for _, d in specs],
                                 [s for s, _ in specs], arena_align=4096)
            self._pin(st.ring)
        return st.ring

    def _pin(self, ring):
        if self.pin_memory is False:
            self._pin_status = {"pinned": False, "pin_reason": "pin_memory=False"}
            return
        from fastq import cuda
        self._pin_status = cuda.pin_ring(ring, required=self.pin_memory is True)

    def __iter__(self):
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
            if hasattr(self._backend, "discover") and not self._backend.discover():
                it = _EpochIterator(self, None, epoch, None)  # empty source: empty epoch
                it._done = True
                return it
            position, self._resume_position = self._resume_position, 0
            ring = self._ensure_ring()
            run_id = ring.begin_run(self.drop_remainder)
            st.producers = self._backend.start(ring, run_id, epoch, position)
            it = _EpochIterator(self, ring, epoch, st.producers)
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

    def __iter__(self):
        return self

    def _drop_refs(self):
        """Forget the ring and producers (so that a finished or abandoned
        iterator the user still references does not keep the slot arena)."""
        self._ring = None
        self._producers = None

    def _supersede(self):
        if not self._done:
            self._superseded = True
            self._done = True
        self._drop_refs()

    def _finish(self):
        self._done = True
        p = self._p
        if p is not None and p._active is self:
            p._active = None
            with p._state.lock:
                if p._state.producers is self._producers:
                    p._state.stop_producers()
        self._drop_refs()

    def __next__(self):
        if self._done:
            if self._superseded:
                raise SupersededIterationError(
                    f"epoch {self.epoch}'s iterator was used after a newer iteration of the same Pipeline "
                    f"started; a Pipeline runs one epoch at a time (create two Pipelines to read twice)")
            raise StopIteration
        p = self._p
        stall = p.stall_timeout if p is not None else 60.0
        failure = None
        if self._ring is None:  # the pipeline was closed
            self._done = True
            raise PipelineClosedError("the Pipeline was closed")
        try:
            res = self._ring.next_batch(stall)
        except _core.BatchFailed as f:
            failure = f
        except SupersededIterationError:
            if p is not None and p.closed:
                self._done = True
                raise PipelineClosedError("the Pipeline was closed while waiting for a batch") from None
            self._finish()
            raise
        except PipelineClosedError:
            self._done = True
            raise
        if failure is not None:
            # Raised outside the except block so the user's exception is not
            # chained to fastq's internal BatchFailed.
            backend = p._backend if p is not None else None
            exc = backend.translate(failure, self._producers) if backend is not None else \
                _core.make_error(failure.code, failure.message, index=failure.item)
            self._finish()
            raise exc
        if res is None:
            self._finish()
            raise StopIteration
        self.position += 1
        return res[1]

    def close(self):
        """Abandon the rest of this epoch (producers stop)."""
        if not self._done:
            self._finish()
