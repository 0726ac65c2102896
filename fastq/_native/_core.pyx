# cython: language_level=3
"""fastq._native._core - thin Cython classes over the C core (csrc/).

Rules kept here:
  * every call that can block runs under ``with nogil``;
  * C errors become Python exceptions in exactly one place, raise_fq_error()
    (declared in _core.pxd, cimported by _image and _cuda);
  * a batch handed to Python is a set of numpy arrays whose base is a Lease;
    the Lease returns the slot to the ring when its last reference dies.
"""
from libc.stdint cimport int64_t, uint64_t, uint8_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from cpython.ref cimport Py_INCREF
from cpython.exc cimport PyErr_CheckSignals
from cpython.mem cimport PyMem_Malloc, PyMem_Free
cimport numpy as cnp
from cpython.object cimport PyTypeObject

from posix.unistd cimport getpid
from fastq._native.includes.numpy_array cimport PyArray_NewFromDescr
from fastq._native.includes.fq_ring_capi cimport fastq_ring_capi_v1

import os
import numpy as np

from fastq import errors as _errors

cnp.import_array()


CODES = {
    "OK": FQ_OK, "NOMEM": FQ_E_NOMEM, "INVALID": FQ_E_INVALID, "TIMEOUT": FQ_E_TIMEOUT,
    "CLOSED": FQ_E_CLOSED, "CANCELLED": FQ_E_CANCELLED, "IO": FQ_E_IO, "EMPTY": FQ_E_EMPTY,
    "DECODE": FQ_E_DECODE, "UNSUPPORTED": FQ_E_UNSUPPORTED, "TOO_LARGE": FQ_E_TOO_LARGE,
    "SOURCE": FQ_E_SOURCE, "STALLED": FQ_E_STALLED, "SYS": FQ_E_SYS, "EOF": FQ_E_EOF,
}


def make_error(int code, message, index=None, path=None):
    """Build (not raise) the exception for a C error code."""
    return _errors.error_for_code(code, message, index=index, path=path)


# The ABI version of the exported ring table (csrc/ring/fq_ring_capi.h) that the TensorFlow
# dataset kernel binds to (reading it here also links the table into this module).
RING_CAPI_ABI_VERSION = fastq_ring_capi_v1.abi_version


# A batch array has 1 + len(sample shape) dimensions; numpy 1.x allows 32.
MAX_SAMPLE_DIMS = 31
cdef enum:
    _DIMS_BUF = 32


cdef int raise_fq_error(fq_err *err, bint sample=False) except -1:
    """The single path from a C error record to a Python exception (declared in
    _core.pxd; _image and _cuda cimport it).  For a failed sample's record
    (sample=True) the exception's ``index`` is the record's sample index."""
    msg = err.msg.decode("utf-8", "replace")
    raise make_error(err.code, msg, index=err.index if sample and err.index >= 0 else None)


cdef class Ring:
    """A ring of batch slots (see csrc/ring/fq_ring.h).

    Thread safety: all methods may be called from any thread; blocking ones
    release the GIL.  The C ring is destroyed only when this object dies, and
    every Lease holds a reference to it, so no handed-out batch can outlive
    the memory it points to.  (Attributes and cdef methods: _core.pxd.)
    """
    def __cinit__(self, int capacity, int batch_size, dtypes, row_shapes, size_t arena_align=4096):
        cdef size_t rb[16]
        cdef fq_err err
        cdef int i
        self.r = NULL
        self.pid = getpid()
        dtypes = tuple(np.dtype(d) for d in dtypes)
        row_shapes = tuple(tuple(int(x) for x in s) for s in row_shapes)
        if len(dtypes) != len(row_shapes) or not 1 <= len(dtypes) <= FQ_RING_MAX_BLOCKS:
            raise ValueError(f"need 1..{FQ_RING_MAX_BLOCKS} outputs with one dtype and shape each, got "
                             f"{len(dtypes)} dtypes and {len(row_shapes)} shapes")
        for i in range(len(dtypes)):
            if len(row_shapes[i]) > MAX_SAMPLE_DIMS:
                raise ValueError(f"output {i}: a sample has {len(row_shapes[i])} dimensions; fastq supports at "
                                 f"most {MAX_SAMPLE_DIMS} (a batch adds one, and numpy arrays have at most 32)")
            if any(x < 0 for x in row_shapes[i]):
                raise ValueError(f"output {i}: negative dimension in sample shape {row_shapes[i]}")
            if dtypes[i].hasobject or dtypes[i].fields is not None or not dtypes[i].isnative:
                raise TypeError(f"output {i}: dtype {dtypes[i]} is not a plain native-endian numeric type; fastq slots hold only those")
            n = int(np.prod(row_shapes[i], dtype=np.int64)) * dtypes[i].itemsize
            if n <= 0:
                raise ValueError(f"output {i}: empty sample shape {row_shapes[i]} dtype {dtypes[i]}")
            rb[i] = <size_t>n
            self._row_bytes[i] = <cnp.npy_intp>n
        fq_clear_err(&err)
        if fq_ring_create(capacity, batch_size, len(dtypes), rb, arena_align, &self.r, &err) != FQ_OK:
            raise_fq_error(&err)
        self.capacity = capacity
        self.batch_size = batch_size
        self.n_blocks = len(dtypes)
        self.dtypes = dtypes
        self.row_shapes = row_shapes

    def __dealloc__(self):
        if self.r != NULL:
            if getpid() == self.pid:
                fq_ring_close(self.r)
                # this object's reference; the arena lives on while fastq's TensorFlow
                # kernel holds one (a TF tensor aliasing a slot)
                fq_ring_unref(self.r)
            # In a forked child the parent's mutex may be held by a thread that
            # no longer exists: leak the ring rather than touch it.
            self.r = NULL

    cdef int _check(self) except -1:
        if getpid() != self.pid:
            raise _errors.ForkedPipelineError(
                f"this fastq pipeline was created in process {self.pid} and cannot be used in a forked "
                f"child (pid {getpid()}): its worker threads do not exist here. Create a new Pipeline in the child.")
        return 0

    cdef fq_ring *handle(self) except NULL:
        self._check()
        return self.r

    @property
    def arena_bytes(self):
        cdef size_t n
        self._check()
        fq_ring_arena(self.r, &n)
        return n

    cdef uint8_t *arena(self, size_t *nbytes) except NULL:
        cdef uint8_t *p
        self._check()
        p = fq_ring_arena(self.r, nbytes)
        if p == NULL:
            raise ValueError("this ring has no slot arena")
        return p

    cdef int install_free_hook(self, fq_ring_free_hook hook, void *ctx, object owner) except -1:
        self._check()
        if self._hook_owner is not None:
            raise ValueError("a free hook is already installed on this ring")
        self._hook_owner = owner if owner is not None else True
        fq_ring_set_free_hook(self.r, hook, ctx)
        return 0

    def retain_native(self):
        """A new reference to the C ring for fastq's TensorFlow dataset kernel, as an
        address: the kernel takes ownership and drops it through fastq_ring_capi_v1.unref
        (csrc/ring/fq_ring_capi.h), so the ring outlives this object while the kernel
        holds it.  Any free hook installed on the ring then runs when the kernel drops
        the last reference (fastq._native._cuda's needs no Python)."""
        self._check()
        fq_ring_retain(self.r)
        return <size_t>self.r

    def row_bytes(self, int block):
        if not 0 <= block < self.n_blocks:
            raise IndexError("block out of range")
        return self._row_bytes[block]

    def begin_run(self, bint drop_remainder):
        """Start a new run (epoch); returns its id, which producers pass on."""
        cdef fq_err err
        cdef int64_t run_id = 0
        self._check()
        if fq_ring_begin_run(self.r, drop_remainder, &run_id, &err) != FQ_OK:
            raise_fq_error(&err)
        return run_id

    def set_end(self, int64_t n_items, bint keep_partial=False):
        cdef fq_err err
        self._check()
        if fq_ring_set_end(self.r, n_items, keep_partial, &err) != FQ_OK:
            raise_fq_error(&err)

    @property
    def run_id(self):
        """Id of the current run (the last begin_run's)."""
        cdef int64_t rid = 0
        cdef fq_err err
        self._check()
        if fq_ring_run_id(self.r, &rid, &err) != FQ_OK:
            raise_fq_error(&err)
        return rid

    def cancel(self):
        self._check()
        with nogil:
            fq_ring_cancel(self.r)

    def close(self):
        if getpid() != self.pid:
            return
        with nogil:
            fq_ring_close(self.r)

    @property
    def closed(self):
        self._check()
        return bool(fq_ring_is_closed(self.r))

    def acquire(self, int64_t run_id, int64_t item, double timeout=-1.0):
        """Producer: wait for item's row.  Returns (slot, row), or None when the
        run was cancelled / ended / the ring closed."""
        cdef int slot = 0, row = 0, rc
        cdef fq_err err
        cdef int64_t tns = <int64_t>(timeout * 1e9) if timeout >= 0 else -1
        self._check()
        with nogil:
            rc = fq_ring_acquire(self.r, run_id, item, tns, &slot, &row, &err)
        if rc == FQ_OK:
            return slot, row
        if rc in (FQ_E_CANCELLED, FQ_E_CLOSED, FQ_E_EOF):
            return None
        raise_fq_error(&err)

    def put_many(self, int64_t run_id, int64_t first_item, list samples):
        """Producer fast path for the Python-source threads: for each sample
        (a list of C-contiguous arrays of the blocks' row sizes), acquire item
        first_item + i's row, copy the fields in and commit - all inside one
        GIL release.  Returns False if the run was cancelled/closed."""
        cdef int nb = self.n_blocks, ns = len(samples), b, i, slot = 0, row = 0, rc = FQ_OK
        cdef uint8_t **src
        cdef size_t nbytes[16]
        cdef cnp.ndarray a
        cdef fq_err err
        cdef fq_ring *r = self.handle()
        cdef uint8_t *dst
        if ns == 0:
            return True
        for b in range(nb):
            nbytes[b] = <size_t>self._row_bytes[b]
        src = <uint8_t **>malloc(sizeof(uint8_t *) * ns * nb)
        if src == NULL:
            raise MemoryError()
        try:
            for i in range(ns):
                fields = samples[i]
                if len(fields) != nb:
                    raise ValueError(f"sample has {len(fields)} fields, expected {nb}")
                for b in range(nb):
                    a = fields[b]
                    if not cnp.PyArray_IS_C_CONTIGUOUS(a) or <size_t>cnp.PyArray_NBYTES(a) != nbytes[b]:
                        raise ValueError(f"field {b}: expected {nbytes[b]} contiguous bytes")
                    src[i * nb + b] = <uint8_t *>cnp.PyArray_DATA(a)
            with nogil:
                for i in range(ns):
                    rc = fq_ring_acquire(r, run_id, first_item + i, -1, &slot, &row, &err)
                    if rc != FQ_OK:
                        break
                    for b in range(nb):
                        dst = fq_ring_block_ptr(r, slot, b) + <size_t>row * nbytes[b]
                        memcpy(dst, src[i * nb + b], nbytes[b])
                    rc = fq_ring_commit(r, run_id, slot, row, NULL, &err)
                    if rc != FQ_OK:
                        break
        finally:
            free(src)
        if rc == FQ_OK:
            return True
        if rc == FQ_E_CANCELLED or rc == FQ_E_CLOSED or rc == FQ_E_EOF:
            return False
        raise_fq_error(&err)

    def commit(self, int64_t run_id, int slot, int row, int code=FQ_OK, message=None, int64_t index=-1):
        """Producer: row written (code 0) or failed (code, message, and the
        sample's index in its source, -1 if none).  Returns False when the run
        was cancelled meanwhile (nothing recorded)."""
        cdef fq_err err, failure
        cdef bytes m = (message or "").encode("utf-8", "replace")[:FQ_ERR_MSG_LEN - 1]
        self._check()
        fq_clear_err(&failure)
        failure.code = code
        memcpy(failure.msg, <const char *>m, len(m))
        failure.msg[len(m)] = 0
        failure.index = index
        cdef int rc = fq_ring_commit(self.r, run_id, slot, row, &failure, &err)
        if rc == FQ_OK:
            return True
        if rc == FQ_E_CANCELLED or rc == FQ_E_CLOSED:
            return False
        raise_fq_error(&err)

    def next_batch(self, double stall_timeout=60.0, double timeout=-1.0):
        """Consumer: wait for the next batch in order and lease it.

        Returns (lease, arrays) where arrays is a tuple of numpy arrays (views
        of the slot, leading dimension = rows in the batch) whose base is the
        lease; returns None at the end of the run.  Raises the sample's error
        (a FastqError whose ``index`` is the failed sample's index in its
        source) when the batch carries one (the lease is released first),
        StalledError when every slot stays leased by the consumer for
        `stall_timeout` seconds, TimeoutError after `timeout` seconds, and
        KeyboardInterrupt promptly on Ctrl-C.
        """
        cdef int slot = 0, n = 0, rc, erow = -1
        cdef int64_t seq = 0
        cdef fq_err err, failure
        cdef uint64_t t_start = fq_now_ns(), t_stall = 0, now
        cdef int64_t slice_ns = 50000000  # wake every 50 ms to check for signals
        self._check()
        while True:
            with nogil:
                rc = fq_ring_next(self.r, slice_ns, &slot, &n, &err)
            if rc == FQ_OK:
                break
            if rc == FQ_E_EOF:
                return None
            if rc == FQ_E_TIMEOUT or rc == FQ_E_STALLED:
                PyErr_CheckSignals()
                now = fq_now_ns()
                if rc == FQ_E_STALLED:
                    if t_stall == 0:
                        t_stall = now
                    elif stall_timeout >= 0 and (now - t_stall) >= <uint64_t>(stall_timeout * 1e9):
                        raise _errors.StalledError(stall_message(stall_timeout, err.msg.decode(), self.capacity))
                else:
                    t_stall = 0
                if timeout >= 0 and (now - t_start) >= <uint64_t>(timeout * 1e9):
                    raise TimeoutError(f"no batch within {timeout:g} s: {err.msg.decode()}")
                continue
            raise_fq_error(&err)
        lease = Lease.__new__(Lease)
        (<Lease>lease).ring = self
        (<Lease>lease).slot = slot
        (<Lease>lease).released = False
        (<Lease>lease).n_rows = n
        if fq_ring_slot_seq(self.r, slot, &seq, &err) != FQ_OK:
            (<Lease>lease)._release()
            raise_fq_error(&err)
        (<Lease>lease).seq = seq
        if fq_ring_slot_error(self.r, slot, &erow, &failure, &err) != FQ_OK:
            (<Lease>lease)._release()
            raise_fq_error(&err)
        if erow >= 0:
            (<Lease>lease)._release()
            raise_fq_error(&failure, True)
        return lease, self._arrays(<Lease>lease, slot, n)

    cdef tuple _arrays(self, Lease lease, int slot, int n):
        cdef int b, k, nd
        cdef cnp.npy_intp dims[_DIMS_BUF]
        cdef cnp.dtype d
        cdef cnp.ndarray a
        out = []
        for b in range(self.n_blocks):
            shape = self.row_shapes[b]
            nd = 1 + len(shape)
            if nd > _DIMS_BUF:  # refused by __cinit__; never write past dims
                raise ValueError(f"output {b}: {nd} dimensions")
            dims[0] = n
            for k in range(nd - 1):
                dims[k + 1] = shape[k]
            d = self.dtypes[b]
            # NewFromDescr (not New with a type number) keeps the full dtype, e.g. the
            # unit of datetime64[ms]; it steals a reference to the descriptor.
            Py_INCREF(d)
            a = PyArray_NewFromDescr(<PyTypeObject *>np.ndarray, d, nd, dims, NULL,
                                     <void *>fq_ring_block_ptr(self.r, slot, b),
                                     cnp.NPY_ARRAY_C_CONTIGUOUS | cnp.NPY_ARRAY_ALIGNED | cnp.NPY_ARRAY_WRITEABLE,
                                     None)
            cnp.set_array_base(a, lease)  # takes its own reference
            out.append(a)
        return tuple(out)

    def stats(self):
        cdef fq_ring_stats st
        cdef fq_err err
        self._check()
        if fq_ring_get_stats(self.r, &st, &err) != FQ_OK:
            raise_fq_error(&err)
        return {
            "queue_size": st.capacity,
            "batch_size": st.batch_size,
            "slots_free": st.n_free,
            "slots_filling": st.n_filling,
            "slots_ready": st.n_ready,
            "slots_leased": st.n_leased,
            "producer_wait_s": st.producer_wait_ns / 1e9,
            "consumer_wait_s": st.consumer_wait_ns / 1e9,
            "batches_delivered": st.batches_delivered,
            "samples_delivered": st.samples_delivered,
            "rows_committed": st.rows_committed,
            "rows_failed": st.rows_failed,
        }


cdef class Lease:
    """Keeps one batch slot out of the ring while referenced.

    Every numpy array of a batch has its Lease as ``base``; TensorFlow keeps
    the array (and so the Lease) alive for as long as a tensor aliases it.
    When the last reference dies the slot goes back to the producers.
    """
    cdef int _release(self) except -1:
        """Give the slot back (once).  In a forked child nothing is touched."""
        cdef fq_err err
        if not self.released and self.ring is not None:
            self.released = True
            if getpid() == self.ring.pid and self.ring.r != NULL:
                if fq_ring_release(self.ring.r, self.slot, &err) != FQ_OK:
                    raise_fq_error(&err)
        return 0

    def __dealloc__(self):
        try:
            self._release()
        except Exception as e:  # noqa: BLE001 - cannot raise from a destructor
            import warnings
            try:
                warnings.warn(f"fastq: batch slot {self.slot} could not be returned to the ring: {e}",
                              RuntimeWarning)
            except Exception:  # noqa: BLE001 - warnings configured as errors
                pass


cdef class TaskBase:
    """A native per-sample task: a C function plus the context it reads
    (declared in _core.pxd, so other extensions subclass it).  Subclasses
    fill `fn` and `ctx` and keep alive whatever ctx points into."""


cdef class NativeRun:
    """N native worker threads producing items [0, n_items) of the ring's
    current run with a TaskBase.  join() waits for them; dropping the object
    cancels the run and joins.

    policy ("keep", "batch", "idle"), nice (an increment, 0..39) and cpus (CPU
    numbers, or None to keep the inherited mask) set how each worker schedules
    itself (csrc/ring/fq_pool.h, "Scheduling"); a setting the kernel refuses is
    reported by stats()["sched_error"], never raised."""
    cdef fq_pool *pool
    cdef readonly Ring ring
    cdef readonly TaskBase task
    cdef readonly int workers
    cdef readonly int64_t n_items
    cdef object _sched_error
    cdef object _final  # stats() at join (the pool is freed then)

    def __cinit__(self, Ring ring not None, TaskBase task not None, int workers, int64_t n_items,
                  policy="keep", int nice=0, cpus=None):
        cdef fq_err err
        cdef int rc
        cdef fq_ring *r = ring.handle()
        cdef fq_sched sched
        cdef int *cpu_arr = NULL
        cdef int i
        self.pool = NULL
        self._sched_error = None
        self._final = None
        if task.fn == NULL or task.ctx == NULL:
            raise ValueError(f"{type(task).__name__} is not initialized (no C task function or context)")
        pols = {"keep": FQ_SCHED_KEEP, "batch": FQ_SCHED_BATCH, "idle": FQ_SCHED_IDLE}
        if policy not in pols:
            raise ValueError(f"worker scheduling policy must be one of {sorted(pols)}, got {policy!r}")
        sched.policy = pols[policy]
        sched.nice = nice
        sched.n_cpus = 0
        sched.cpus = NULL
        cpu_list = [] if cpus is None else [int(c) for c in cpus]
        if cpus is not None and not cpu_list:
            raise ValueError("the worker CPU list is empty")
        self.ring = ring
        self.task = task
        self.workers = workers
        self.n_items = n_items
        if cpu_list:
            cpu_arr = <int *>PyMem_Malloc(len(cpu_list) * sizeof(int))
            if cpu_arr == NULL:
                raise MemoryError()
            for i in range(len(cpu_list)):
                cpu_arr[i] = cpu_list[i]
            sched.n_cpus = len(cpu_list)
            sched.cpus = cpu_arr
        try:
            with nogil:
                rc = fq_pool_start_sched(r, workers, n_items, task.fn, task.ctx, &sched, &self.pool, &err)
        finally:
            PyMem_Free(cpu_arr)
        if rc != FQ_OK:
            raise_fq_error(&err)

    cdef _keep_sched_error(self):
        cdef fq_err err
        if self.pool != NULL and fq_pool_sched_error(self.pool, &err) != FQ_OK:
            self._sched_error = err.msg.decode("utf-8", "replace")

    def join(self):
        """Wait for every worker (after the run ends or is cancelled)."""
        cdef fq_err err
        cdef int rc = FQ_OK
        cdef fq_pool *p = self.pool
        if p == NULL:
            return
        self.ring._check()
        self._final = self.stats()
        self._final["running"] = 0
        self.pool = NULL
        with nogil:
            rc = fq_pool_join(p, &err)
        if rc != FQ_OK:
            raise_fq_error(&err)

    @property
    def running(self):
        cdef fq_pool_stats st
        if self.pool == NULL:
            return 0
        fq_pool_get_stats(self.pool, &st)
        return st.running

    def stats(self):
        cdef fq_pool_stats st
        if self.pool == NULL:
            return dict(self._final) if self._final is not None else {"workers": self.workers, "running": 0}
        fq_pool_get_stats(self.pool, &st)
        self._keep_sched_error()
        return {"workers": st.n_workers, "running": st.running, "items_done": st.items_done,
                "items_failed": st.items_failed, "task_s": st.task_ns / 1e9,
                "sched_applied": st.sched_applied, "sched_error": self._sched_error}

    def __dealloc__(self):
        cdef fq_err err
        cdef fq_pool *p = self.pool
        if p != NULL and self.ring is not None and getpid() == self.ring.pid:
            self.pool = NULL
            fq_ring_cancel(self.ring.r)
            with nogil:
                fq_pool_join(p, &err)


def now_ns():
    return fq_now_ns()


def stall_message(double stall_timeout, detail, int capacity):
    """StalledError's message (the Python consumer's and fastq.tf's native feed's)."""
    return (f"fastq consumer stalled for {stall_timeout:g} s: {detail}; "
            f"queue_size={capacity}. A batch's slot is only reused "
            f"when every array (or TF tensor) viewing it is gone, and the producers need at "
            f"least one slot the consumer does not hold; delete batches you keep, copy "
            f"what you need to keep, or raise queue_size above the number of batches held at once "
            f"(including tf.data buffers such as prefetch, shuffle and cache).")
include "_http.pxi"
