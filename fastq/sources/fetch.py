"""The fetcher of the remote sources: many GETs in flight, in the epoch's order,
into the native readers without a copy.

A remote source (Files / Folder of URLs, TFRecord / WebDataset shards at URLs)
knows, per sample, which bytes of which object it needs (a whole object, or a
range of a shard).  For each epoch (each run of a pipeline) a :class:`Fetcher`:

1. plans requests: samples whose bytes lie close together in a shard and whose
   positions in the epoch order are close are read in one ranged GET (at most
   ``chunk_bytes``); whole objects are one GET each.  Requests are issued in the
   order of the first position that needs them;
2. keeps up to ``max_in_flight`` requests running on an asyncio loop (obstore's
   calls release the GIL and run on its own Rust runtime), while the fetched bytes
   held (in flight + not yet read by the workers) stay under ``max_bytes``;
3. lends each fetched buffer to the native readers through a
   :class:`fastq._native._image.Spans` table (csrc/records/fq_spans.h): the workers decode
   straight from obstore's buffer (or from the cache file's mapping);
4. frees a buffer when the table hands its token back (every sample it was fetched
   for was read), and answers *demands*: a worker waiting for bytes nobody planned
   (a skip replacement, a sample read again) or planned far ahead (brought forward).

Transient failures are retried inside :func:`fastq.sources.storage.fetch`; a
permanent one becomes a failing range in the table, so that the sample fails
with the URL in its message (or is a counted skip with ``on_error="skip"``).
"""
import asyncio
import concurrent.futures
import os
import random
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from fastq.sources.cache import LocalCache
from fastq.sources.ramp import Ramp
from fastq.sources.storage import (COUNT_FAILURES, Counters, ObjectInfo, RemoteError, RemoteOptions, fetch,
                                   http_client_of, run_loop, run_sync)

__all__ = ["RemoteSet", "Fetcher"]

WHOLE = np.uint64(0xFFFFFFFFFFFFFFFF)
_PENDING, _INFLIGHT, _LIVE, _DONE = 0, 1, 2, 3

_malloc_lock = threading.Lock()
_malloc_tuned: Optional[Tuple[int, int]] = None  # (mmap threshold, trim threshold) once set


def keep_chunks_in_heap(chunk_bytes):
    """RemoteOptions.tune_malloc: glibc's malloc gives buffers over its mmap threshold
    (128 KiB, raised only as such buffers are freed) their own mapping, and returns
    freed memory above its trim threshold to the kernel; a shard's chunks (obstore's
    buffers, up to chunk_bytes, allocated on its runtime's threads and freed here)
    then come in fresh pages, each faulted in and zeroed.  Fixing the mmap threshold
    above the chunk size, and the trim threshold at 4x that, lets freed chunks be
    reused.  Once per process; a no-op off glibc or where the user set malloc's
    thresholds or tunables.  -> (mmap, trim) thresholds set, or None."""
    global _malloc_tuned
    with _malloc_lock:
        if _malloc_tuned is not None:
            return _malloc_tuned
        import ctypes
        import platform
        if platform.libc_ver()[0] != "glibc" or any(
                k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")) \
                or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
            return None
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):
            return None
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        mmap_t = min(32 << 20, max(16 << 20, 2 * int(chunk_bytes)))  # glibc caps it at 32 MiB (64-bit)
        trim_t = 4 * mmap_t  # 64 MiB: what glibc's own rule sets after freeing a 32 MiB buffer
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # <malloc.h>
        if mallopt(M_MMAP_THRESHOLD, mmap_t) != 1 or mallopt(M_TRIM_THRESHOLD, trim_t) != 1:
            return None
        _malloc_tuned = (mmap_t, trim_t)
        return _malloc_tuned


class RemoteSet:
    """The remote side of a source: its objects, and per sample the bytes it needs.

    obj[i]: the object of sample i; off[i], end[i]: its byte range (end = WHOLE: the
    whole object); skip[i]: the reader fails the sample before reading (a broken
    record, a tar sample without an image): never planned."""

    def __init__(self, objects: List[ObjectInfo], opts: RemoteOptions, counters: Counters, cache: Optional[LocalCache],
                 obj, off, end, skip=None):
        self.objects = objects
        self.opts = opts
        self.counters = counters
        self.cache = cache
        self.obj = np.ascontiguousarray(obj, np.int32)
        self.off = np.ascontiguousarray(off, np.uint64)
        self.end = np.ascontiguousarray(end, np.uint64)
        self.skip = np.zeros(len(self.obj), bool) if skip is None else np.ascontiguousarray(skip, bool)
        self.whole = bool(len(self.end)) and bool((self.end == WHOLE).all())
        self.avg_bytes = self._avg_bytes()
        self.ramp = Ramp(opts)
        # cache fills under way, shared by the epochs' fetchers (object -> a Future of its
        # bytes; see Fetcher._cached): an epoch can end with requests it did not need still
        # filling, and the next epoch's fetcher awaits those fills instead of repeating them
        self.fills: Dict[int, concurrent.futures.Future] = {}
        self.fills_lock = threading.Lock()

    def _avg_bytes(self):
        if self.whole:
            sizes = [o.size for o in self.objects if o.size is not None]
            return int(np.mean(sizes)) if sizes else 256 << 10
        ok = ~self.skip
        return int(np.mean((self.end[ok] - self.off[ok]).astype(np.float64))) if ok.any() else 1 << 10

    def spans(self):
        from fastq._native import _image
        return _image.Spans(len(self.objects), len(self.obj))

    def plan(self, order):
        """Requests for one epoch order: a list of (obj, start, end or None, claims
        (int64 array), first position), sorted by first position."""
        order = np.asarray(order, np.int64)
        keep = ~self.skip[order]
        pos = np.nonzero(keep)[0].astype(np.int64)
        idx = order[keep]
        if self.whole:
            return [(int(self.obj[i]), 0, None, np.array([i], np.int64), int(p)) for i, p in zip(idx.tolist(), pos.tolist())]
        opts = self.opts
        # how far apart (in positions) the samples of one request may be needed: what
        # half the memory cap holds, so that a request is not kept for most of an epoch
        window = max(16, int(opts.max_bytes // max(1, self.avg_bytes)) // 2)
        srt = np.lexsort((self.off[idx], self.obj[idx]))
        o_s, a_s, e_s = self.obj[idx][srt], self.off[idx][srt], self.end[idx][srt]
        i_s, p_s = idx[srt], pos[srt]
        reqs = []
        n = len(srt)
        k = 0
        o_l, a_l, e_l, p_l = o_s.tolist(), a_s.tolist(), e_s.tolist(), p_s.tolist()
        while k < n:
            o, start, end, pmin, pmax = o_l[k], a_l[k], e_l[k], p_l[k], p_l[k]
            j = k + 1
            while j < n and o_l[j] == o and a_l[j] >= start and a_l[j] - end <= opts.gap_bytes and \
                    max(end, e_l[j]) - start <= opts.chunk_bytes and \
                    max(pmax, p_l[j]) - min(pmin, p_l[j]) <= window:
                end = max(end, e_l[j])
                pmin, pmax = min(pmin, p_l[j]), max(pmax, p_l[j])
                j += 1
            reqs.append((o, start, end, i_s[k:j].copy(), pmin))
            k = j
        reqs.sort(key=lambda r: r[4])
        return reqs


class Fetcher:
    """One epoch's requests for one pipeline (see the module docstring).  start()
    runs an event loop thread and a poll thread; stop() ends the poll thread and
    abandons this epoch's requests in flight within about a second.

    The next epoch's prefetches (see _issue_next) outlive stop(): the loop thread
    stays until those in flight have finished, and the next epoch's fetcher, given
    this one as `carry`, takes what has arrived and adopts what is still on its way
    (_handed_over): a prefetch that an epoch's end overtook is neither lost nor sent
    twice.  abandon() cancels them (close, a seek, or nobody took them)."""

    POLL_MS = 50  # the poll thread's longest wait (a demand wakes it at once; see poll_tokens)
    # The native HTTP client's results reach the loop at most every GATHER_S while they keep
    # coming (nethttp.gather_results): one wake-up of the loop thread for several results.  A
    # result held back would hold its request's place among max_in_flight, so with the native
    # client the fetcher submits up to half as many again (QUEUED_EXTRA of max_in_flight): the
    # pool runs at most max_in_flight of them at once (its threads) and queues the rest, and a
    # pool thread that finishes a request finds the next one waiting instead of sleeping until
    # the loop's next hand-over (docs/cloud.md, "Wake-ups")
    GATHER_S = 0.005
    QUEUED_EXTRA = 0.5

    def __init__(self, rs: RemoteSet, spans, order, next_order=None, carry=None):
        self.rs = rs
        self.spans = spans
        self.opts = rs.opts
        self.counters = rs.counters
        self.reqs = rs.plan(order) if order is not None else []
        # the next epoch's first requests, fetched once this epoch's are all issued (see
        # _issue_next): {(obj, start, end): buffer}, handed to the next epoch's fetcher
        self.next_order = next_order
        self.next_reqs: Optional[list] = None
        self.next_k = 0
        # the previous epoch's fetcher, whose prefetches this one takes (see _use_carry)
        self.prev: Optional["Fetcher"] = carry
        self.carry_out: Dict[Any, Any] = {}
        self.carry_bytes = 0
        self.carried = 0
        # carry_out, next_pending and handoff are shared with the next epoch's fetcher,
        # whose loop thread takes them (under carry_lock) while this loop may still fill them
        self.carry_lock = threading.Lock()
        self.next_pending: Dict[Any, int] = {}  # (obj, start, end) of a prefetch in flight -> est
        self.handoff: Optional[Callable[[Any, Any], None]] = None
        self.abandoned = False
        # key -> (request, est) of each of prev's prefetches still in flight ((None, 0): one this
        # epoch does not want); they count against max_in_flight (see _busy)
        self.adopting: Dict[Any, Tuple[Optional[int], int]] = {}
        self.state = [_PENDING] * len(self.reqs)
        self.req_of: Dict[int, int] = {}
        for r, req in enumerate(self.reqs):
            for i in req[3].tolist():
                self.req_of[i] = r
        self.buffers: Dict[int, Any] = {}    # token -> (buffer, bytes, request id)
        self.next_token = 1
        self.next_req = 0
        self.inflight: Dict[Any, asyncio.Task] = {}  # request id (int), or ("next", k): a prefetch
        self.held = 0
        self.max_held = 0
        self.extra_reqs = 0
        self.ramp_wake = False  # a wake-up after a ramp tick is scheduled (_limit)
        self.stopping = False
        self.put_lock = threading.Lock()  # no put after stop() returned (see _fetch)
        self.filling: Dict[int, Any] = {}  # object -> its cache fill (a future on this loop; see _cached)
        self.fill_tasks: Dict[int, asyncio.Task] = {}  # object -> the fill this fetcher runs (_fill)
        self.failed: Optional[BaseException] = None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.loop_kind: Optional[str] = None  # "uvloop" or "asyncio" once the loop runs (RemoteOptions.event_loop)
        self.gather_s = 0.0  # the native client's result gathering (GATHER_S where it reads, else 0)
        self.queued_extra = 0  # requests submitted beyond max_in_flight (native client: see GATHER_S)
        self.rng = random.Random(self.opts.seed)
        self._ready = threading.Event()
        self._own_ended = threading.Event()  # this epoch's requests cancelled (stop())
        # freed buffers that wake the poll thread (and the loop): at most 64 of them, or as
        # many requests as 1/16 of the byte cap holds (the issuing that a cap holds back
        # waits for them; shard chunks are large)
        req_bytes = rs.avg_bytes if rs.whole else self.opts.chunk_bytes
        self.poll_tokens = max(1, min(64, int(self.opts.max_bytes // 16 // max(1, req_bytes))))
        self._thread = threading.Thread(target=self._run, name="fastq-fetch", daemon=True)
        self._poller = threading.Thread(target=self._poll_loop, name="fastq-fetch-poll", daemon=True)

    # -- threads -------------------------------------------------------------
    def start(self):
        if not self.rs.whole and self.opts.tune_malloc:
            keep_chunks_in_heap(self.opts.chunk_bytes)
        self._thread.start()
        self._ready.wait()
        self._poller.start()
        return self

    def _run(self):
        try:
            run_loop(self._main(), self.opts.event_loop)
        except BaseException as e:  # noqa: BLE001 - reported to the waiting workers
            self.failed = e
            self._ready.set()
            if not self.stopping:
                self.spans.abort(f"the remote fetcher failed: {type(e).__name__}: {e}")

    def _poll_loop(self):
        # freed buffers are gathered into one wake-up of the loop (up to POLL_MS, or until
        # poll_tokens of them wait); a demand, which a worker waits on, is forwarded at once
        n_tok = self.poll_tokens
        while not self.stopping:
            dem, tok = self.spans.poll(self.POLL_MS, n_tok)
            if (dem or tok) and not self.stopping:
                try:
                    self.loop.call_soon_threadsafe(self._on_poll, dem, tok)
                except RuntimeError:  # the loop closed: stopping
                    return

    async def _main(self):
        self.loop = asyncio.get_running_loop()
        self.loop_kind = "uvloop" if type(self.loop).__module__.startswith("uvloop") else "asyncio"
        self.wake = asyncio.Event()
        if self.GATHER_S > 0 and self.rs.objects and http_client_of(self.rs.objects[0].store) == "native":
            from fastq.sources import nethttp
            nethttp.gather_results(self.loop, self.GATHER_S)
            self.gather_s = self.GATHER_S
            self.queued_extra = max(1, int(self.opts.max_in_flight * self.QUEUED_EXTRA))
        self._ready.set()
        self._use_carry()
        while not self.stopping:
            self._issue()
            await self.wake.wait()
            self.wake.clear()
        own = [t for k, t in self.inflight.items() if not isinstance(k, tuple)]
        for t in own:
            t.cancel()
        if own:
            await asyncio.wait(own, timeout=0.5)
        self.held = 0  # this epoch's buffers are dropped by the caller
        self._own_ended.set()
        # the next epoch's prefetches still in flight finish, for the next fetcher, and so do
        # the cache fills this loop runs (the next fetcher may await them: see _cached)
        while not self.abandoned:
            nxt = [t for k, t in self.inflight.items() if isinstance(k, tuple)] + list(self.fill_tasks.values())
            if not nxt:
                break
            await asyncio.wait(nxt, return_when=asyncio.FIRST_COMPLETED)
        if self.abandoned:
            rest = list(self.inflight.values()) + list(self.fill_tasks.values())
            for t in rest:
                t.cancel()
            if rest:
                await asyncio.wait(rest, timeout=0.5)

    def stop(self):
        """End the loop and the poll thread (requests in flight are abandoned); waiting
        reads are interrupted.  The caller then resets the spans table and drops this
        fetcher (its buffers)."""
        with self.put_lock:
            self.stopping = True
        # wake the poll thread now: an interrupt it saw before `stopping` was set sent it back
        # into a 50 ms wait, which the epoch's end then waited out (the caller resets the table)
        self.spans.interrupt()
        if self.loop is not None:
            try:
                self.loop.call_soon_threadsafe(self.wake.set)
            except RuntimeError:
                pass
        if self._thread.is_alive():
            self._own_ended.wait(2.0)
        prev, self.prev = self.prev, None
        if prev is not None:  # what it still had on its way is of no use now
            prev.abandon()
        if self._poller.is_alive():
            self._poller.join(1.0)
        return self._own_ended.is_set() or not self._thread.is_alive()

    def abandon(self):
        """Cancel the next epoch's prefetches and end the loop thread (within about a
        second); what they brought is dropped."""
        with self.carry_lock:
            self.abandoned = True
            self.handoff = None
            self.carry_out = {}
            self.next_pending = {}
            self.carry_bytes = 0
        if self.prev is not None:
            self.prev.abandon()
            self.prev = None
        if self.loop is not None and self._thread.is_alive():
            try:
                self.loop.call_soon_threadsafe(self._cancel_all)
            except RuntimeError:  # the loop closed meanwhile
                pass
        if self._thread is not threading.current_thread():
            self._thread.join(2.0)

    def _cancel_all(self):
        for t in list(self.inflight.values()) + list(self.fill_tasks.values()):
            t.cancel()
        self.wake.set()

    # -- on the loop ------------------------------------------------------------
    def _est(self, r):
        o, start, end = self.reqs[r][:3]
        if end is not None:
            return end - start
        size = self.rs.objects[o].size
        return size if size is not None else self.rs.avg_bytes

    def _busy(self):
        """Requests in flight for this pipeline: this fetcher's own and the previous epoch's
        prefetches still on their way.  Both hold a connection: counting only its own, an
        epoch began with up to twice max_in_flight requests, the client opened as many new
        connections at once, and a server with a short listen backlog (Python's http.server:
        5) dropped the excess SYNs / handshakes, which TCP retries after 1, 3, 7... s (the
        epoch-boundary stall, up to the request timeout; see docs/cloud.md).  (With the native
        client, up to queued_extra of them wait in its pool's queue rather than on a
        connection: the pool runs at most max_in_flight.)"""
        return len(self.inflight) + len(self.adopting)

    def _limit(self):
        """The in-flight limit now (Ramp); while it holds requests back, the loop is woken
        again after one of its ticks."""
        lim = self.rs.ramp.limit(time.monotonic())
        if lim < self.opts.max_in_flight and not self.ramp_wake:
            self.ramp_wake = True
            self.loop.call_later(Ramp.TICK_S, self._ramp_tick)
        # (requests queued in the native pool beside those it runs: not while the ramp holds
        # the connections back)
        return lim + self.queued_extra if lim >= self.opts.max_in_flight else lim

    def _ramp_tick(self):
        self.ramp_wake = False
        self.wake.set()

    def _issue(self):
        n = len(self.reqs)
        lim = self._limit()
        while self.next_req < n and self._busy() < lim:
            r = self.next_req
            if self.state[r] != _PENDING:
                self.next_req += 1
                continue
            est = self._est(r)
            if self.held and self.held + self.carry_bytes + est > self.opts.max_bytes:
                break
            self.next_req += 1
            self._start(r, est)
        if self.next_req >= n and self.next_order is not None:
            self._issue_next()

    def _use_carry(self):
        """Take the previous epoch's prefetches for this epoch's requests: those that
        arrived go into the table at once; those still in flight are adopted (the
        previous loop hands each over as it arrives, see _adopt), not requested again.
        Prefetches no request of this epoch wants are dropped (those still in flight when
        they arrive: until then they count as in flight here)."""
        prev = self.prev
        if prev is None:
            return
        with prev.carry_lock:
            if prev.abandoned:
                return
            # copies, taken under the lock: prev's loop pops next_pending as prefetches end
            # (from now on handing each to _handed_over); reading the live dict, a prefetch
            # that ended meanwhile was neither adopted nor taken, and was requested again
            arrived, pending = prev.carry_out, dict(prev.next_pending)
            prev.carry_out, prev.carry_bytes = {}, 0
            prev.handoff = self._handed_over
        for r, (o, start, end, claims, _) in enumerate(self.reqs):
            key = (o, start, end)
            got = arrived.pop(key, None)
            if got is not None:
                self._arrived(r, got, 0)
            elif key in pending and key not in self.adopting:
                est = self._est(r)
                self.state[r] = _INFLIGHT
                self.held += est
                self.adopting[key] = (r, est)
        for key in pending:
            self.adopting.setdefault(key, (None, 0))  # unwanted, but holds a connection until it ends
        self.max_held = max(self.max_held, self.held)

    def _handed_over(self, key, got):
        """Called on the previous fetcher's loop thread (under its carry_lock) when a
        prefetch ends: got is (buffer, offset, whole), or None if it failed."""
        try:
            self.loop.call_soon_threadsafe(self._adopt, key, got)
        except RuntimeError:  # this fetcher's loop has ended: nothing wants it
            pass

    def _adopt(self, key, got):
        r_est = self.adopting.pop(key, None)
        if r_est is None or self.stopping:
            return
        r, est = r_est
        if r is None:  # a prefetch this epoch does not want: dropped; its slot is free
            pass
        elif got is None:  # failed as a prefetch: this epoch requests it (and reports it)
            self.held -= est
            self.state[r] = _PENDING
            self.next_req = min(self.next_req, r)
        else:
            self._arrived(r, got, est)
        self.wake.set()

    def _arrived(self, r, got, est):
        """Request r's bytes came from the previous epoch's fetcher."""
        self.carried += 1
        self._lend(r, got, est)

    def _lend(self, r, got, est):
        """Request r's bytes are here (got: buffer, its offset in the object, whole?):
        lend them to the readers through the table (est: what was counted as held for
        the request while it was on its way)."""
        o, _, _, claims, _ = self.reqs[r]
        buf, off, whole = got
        n = len(buf)
        tok = self.next_token
        self.next_token += 1
        self.buffers[tok] = (buf, n, r)
        self.held += n - est
        self.max_held = max(self.max_held, self.held)
        self.state[r] = _LIVE
        with self.put_lock:
            if not self.stopping:  # after stop() the table is reset: nothing may point into it
                self.spans.put(o, off, buf, whole, tok, claims)

    def _issue_next(self):
        """Prefetch the next epoch's first requests into carry_out, within
        opts.next_epoch_bytes (default half the byte cap) and the in-flight limit, once this epoch's requests are all issued:
        the next epoch starts without waiting for the store (an epoch boundary costs
        what a local one does).  A failed prefetch is dropped (the next epoch fetches
        again and reports it)."""
        if self.next_reqs is None:
            self.next_reqs = self.rs.plan(self.next_order)
        nb = self.opts.next_epoch_bytes
        cap = min(self.opts.max_bytes // 2 if nb is None else nb, self.opts.max_bytes)
        lim = self._limit()
        while self.next_k < len(self.next_reqs) and self._busy() < lim:
            o, start, end = self.next_reqs[self.next_k][:3]
            size = self.rs.objects[o].size
            est = (end - start) if end is not None else (size if size is not None else self.rs.avg_bytes)
            if self.carry_bytes + est > cap or self.held + self.carry_bytes + est > self.opts.max_bytes:
                break
            self.next_k += 1
            key = ("next", self.next_k)
            with self.carry_lock:
                self.carry_bytes += est
                self.next_pending[(o, start, end)] = est
            self.rs.ramp.started()
            self.inflight[key] = self.loop.create_task(self._prefetch(key, o, start, end, est))

    async def _prefetch(self, key, o, start, end, est):
        got = None
        COUNT_FAILURES.set(False)  # (this task's context) the next epoch fetches again and reports it
        try:
            got = await self._get_bytes(o, self.rs.objects[o], start, end)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - not a failure of this epoch (above)
            pass
        finally:
            self.inflight.pop(key, None)
            self.rs.ramp.ended(time.monotonic())
            with self.carry_lock:
                rkey = (o, start, end)
                if self.next_pending.pop(rkey, None) is not None:
                    if self.handoff is not None:
                        self.handoff(rkey, got)   # the next epoch's fetcher took over
                    else:
                        self.carry_bytes -= est
                        if got is not None:
                            self.carry_out[rkey] = got
                            self.carry_bytes += len(got[0])
            if not self.stopping:
                self.wake.set()

    def _start(self, r, est):
        self.state[r] = _INFLIGHT
        self.held += est
        self.max_held = max(self.max_held, self.held)
        self.rs.ramp.started()
        self.inflight[r] = self.loop.create_task(self._fetch(r, est))

    def _on_poll(self, dem, tok):
        if self.stopping:  # the table was reset: only the next epoch's prefetches remain
            return
        for t in tok:
            got = self.buffers.pop(t, None)
            if got is not None:
                self.held -= got[1]
                self.state[got[2]] = _DONE
        for i in dem:
            r = self.req_of.get(i)
            if r is not None and self.state[r] == _PENDING:
                self._start(r, self._est(r))  # needed now: brought forward, past the caps
            elif (r is None or self.state[r] == _DONE) and self.spans.wanted(i):
                # read again (or never planned): on its own.  (A demand the poll thread took
                # before its request's bytes or failure arrived is met already: not wanted.)
                self._demand(i)
            # _INFLIGHT / _LIVE: its bytes are on their way or just arrived
        self.wake.set()

    def _demand(self, i):
        rs = self.rs
        o = int(rs.obj[i])
        end = None if rs.end[i] == WHOLE else int(rs.end[i])
        self.reqs.append((o, int(rs.off[i]), end, np.array([i], np.int64), -1))
        self.state.append(_PENDING)
        self.req_of[i] = len(self.reqs) - 1
        self.extra_reqs += 1
        r = len(self.reqs) - 1
        self._start(r, self._est(r))

    async def _fetch(self, r, est):
        o, start, end, claims, _ = self.reqs[r]
        obj = self.rs.objects[o]
        whole = end is None
        try:
            if self.rs.cache is None:  # (the common case, without _get_bytes' frame)
                if whole:
                    got = (await fetch(obj, None, None, self.opts, self.counters, self.rng), 0, True)
                else:
                    got = (await fetch(obj, start, end, self.opts, self.counters, self.rng), start, False)
            else:
                got = await self._get_bytes(o, obj, start, end)
            self._lend(r, got, est)
        except asyncio.CancelledError:
            raise
        except RemoteError as e:
            self.held -= est
            self.state[r] = _DONE
            self.spans.fail(o, start, (end - start) if end is not None else 0, whole, str(e), claims)
        except Exception as e:  # noqa: BLE001 - any other failure fails the samples, named
            self.held -= est
            self.state[r] = _DONE
            self.spans.fail(o, start, (end - start) if end is not None else 0, whole,
                            f"GET {obj.url}: {type(e).__name__}: {e}", claims)
        finally:
            self.inflight.pop(r, None)
            self.rs.ramp.ended(time.monotonic())
            if not self.stopping:
                self.wake.set()

    async def _get_bytes(self, o, obj, start, end):
        """(buffer, its offset in the object, whole?) for [start, end) of obj (end None: all).
        With a cache: the whole object, from the cache file's mapping (written first on a miss,
        once per object however many requests want it)."""
        cache = self.rs.cache
        if cache is not None:
            mv = cache.open(obj)
            if mv is not None:
                self.counters.cache_hits += 1
                return mv, 0, True
            if not cache.fills:  # a spool that does not hold obj (or released): read it remotely
                cache = None
        if cache is not None:
            return await self._cached(o, obj), 0, True
        if end is None:
            return await fetch(obj, None, None, self.opts, self.counters, self.rng), 0, True
        return await fetch(obj, start, end, self.opts, self.counters, self.rng), start, False

    async def _cached(self, o, obj):
        """Object o's bytes through the cache, after a miss: fetched and written once, however
        many requests of this epoch, and of the next one, want it.  A fill that another
        epoch's fetcher runs is awaited (its loop keeps running until its fills end, see
        _main); one it abandoned (close, a seek) is started again here."""
        rs = self.rs
        while True:
            fut = self.filling.get(o)
            if fut is None:
                with rs.fills_lock:
                    cf = rs.fills.get(o)
                    if cf is None:
                        # (a fill pops its entry after writing the file: none left, and no file,
                        # means no fill under way)
                        mv = rs.cache.open(obj)
                        if mv is not None:
                            self.counters.cache_hits += 1
                            return mv
                        self.counters.cache_misses += 1
                        cf = rs.fills[o] = concurrent.futures.Future()
                        self.fill_tasks[o] = self.loop.create_task(self._fill(o, obj, cf))
                fut = self.filling[o] = _on_loop(cf, self.loop)
            try:
                return await asyncio.shield(fut)  # a cancelled request leaves the fill running
            except _FillAbandoned:
                if self.filling.get(o) is fut:
                    del self.filling[o]
                if self.stopping or self.abandoned:
                    raise asyncio.CancelledError() from None

    async def _fill(self, o, obj, cf):
        """Fetch object o whole, write it into the cache and give cf its bytes (the cache
        file's mapping; the bytes themselves if the file could not be written) or the
        failure."""
        rs = self.rs
        try:
            data = await fill_object(obj, self.opts, self.counters, self.rng)
            self.counters.cache_bytes_written += await asyncio.to_thread(rs.cache.store, obj, data)
            mv = rs.cache.open(obj)
            out = mv if mv is not None else (data[0] if len(data) == 1 else b"".join(data))
        except asyncio.CancelledError:
            _end_fill(rs, o, cf, None, _FillAbandoned(f"the cache fill of {obj.url} was abandoned"))
            raise
        except Exception as e:  # noqa: BLE001 - every request that awaits it reports it
            _end_fill(rs, o, cf, None, e)
        else:
            _end_fill(rs, o, cf, out, None)
        finally:
            self.fill_tasks.pop(o, None)

    def stats(self):
        with self.carry_lock:
            ahead = len(self.carry_out) + len(self.next_pending)
        return {"requests_planned": len(self.reqs) - self.extra_reqs, "requests_extra": self.extra_reqs,
                "in_flight": len(self.inflight), "bytes_held": self.held + self.carry_bytes,
                "max_bytes_held": self.max_held, "requests_carried_in": self.carried,
                "requests_prefetched_for_next_epoch": ahead, "event_loop": self.loop_kind,
                "result_gather_s": self.gather_s,
                "http_client": http_client_of(self.rs.objects[0].store) if self.rs.objects else None,
                "ramps": self.rs.ramp.ramps}


class _FillAbandoned(Exception):
    """A cache fill's fetcher ended before it did (close, a seek): whoever awaits it fills
    the object again."""


def _end_fill(rs, o, cf, out, exc):
    with rs.fills_lock:
        if rs.fills.get(o) is cf:
            del rs.fills[o]
    if exc is None:
        cf.set_result(out)
    else:
        cf.set_exception(exc)


def _on_loop(cf, loop):
    """A future on loop that takes cf's outcome.  Unlike asyncio.wrap_future, cancelling it
    leaves cf (which other loops may await) alone, and a loop that ended before cf did is
    skipped."""
    fut = loop.create_future()

    def put():
        if fut.cancelled():
            return
        e = cf.exception()
        if e is None:
            fut.set_result(cf.result())
        else:
            fut.set_exception(_own_copy(e))
            fut.exception()  # (retrieved: all its requests may have been cancelled)

    def done(_):
        try:
            loop.call_soon_threadsafe(put)
        except RuntimeError:  # that loop has ended: nobody waits there
            pass
    cf.add_done_callback(done)
    return fut


def _own_copy(e):
    """Exception e for one loop's waiters: a copy chained to e (its __cause__), so that no
    exception object is raised in two threads at once (each raise writes its __traceback__);
    e itself when it cannot be copied."""
    try:
        c = type(e).__new__(type(e), *e.args)
        c.args = e.args  # (OSError.__new__ leaves them to a subclass's own __init__)
        if isinstance(e, OSError):  # its fields live outside __dict__ (None: left unset, as str() tells)
            for f in ("errno", "strerror", "filename", "filename2"):
                if getattr(e, f) is not None:
                    setattr(c, f, getattr(e, f))
        c.__dict__.update(e.__dict__)
    except Exception:  # noqa: BLE001 - a class whose instances cannot be made this way
        return e
    c.__cause__ = e
    return c


async def fill_object(obj: ObjectInfo, opts: RemoteOptions, counters: Counters, rng) -> list:
    """The whole object as a list of buffers: one GET, or ranged GETs of chunk_bytes
    in parallel when its size is known and larger (large shards)."""
    if obj.size is None or obj.size <= opts.chunk_bytes:
        return [await fetch(obj, None, None, opts, counters, rng)]
    sem = asyncio.Semaphore(max(1, min(16, opts.max_in_flight)))
    bounds = list(range(0, obj.size, opts.chunk_bytes))

    async def one(a):
        async with sem:
            return await fetch(obj, a, min(obj.size, a + opts.chunk_bytes), opts, counters, rng)
    return list(await asyncio.gather(*(one(a) for a in bounds)))


def download(obj: ObjectInfo, opts: RemoteOptions, counters: Counters, dest: str):
    """Write the whole object to the local file dest (index building); returns its size."""
    parts = run_sync(fill_object(obj, opts, counters, random.Random(opts.seed)), opts.event_loop)
    n = 0
    with open(dest, "wb") as f:
        for b in parts:
            f.write(b)
            n += len(b)
    return n


class RemoteRun:
    """The producers of one remote run: the native workers plus the fetcher.  stop()
    wakes workers waiting for bytes, joins them, stops the fetcher, and only then
    drops every fetched buffer (spans reset first: nothing points into them)."""

    def __init__(self, native, fetcher, spans, epoch=None):
        self.native = native
        self.fetcher = fetcher
        self.spans = spans
        self.epoch = epoch
        self._stats = None

    def stop(self, timeout=None):
        self.spans.interrupt()
        self.native.stop(timeout)
        self.fetcher.stop()  # no put after this returns, even if its loop thread lingers
        self._stats = self.fetcher.stats()
        self.spans.reset()   # no entry left: nothing points into the fetched buffers
        self.fetcher.buffers.clear()
        self._stats["bytes_held"] = self.fetcher.carry_bytes  # prefetched for the next epoch

    def stats(self):
        out = self.native.stats()
        out["fetch"] = self._stats if self._stats is not None else self.fetcher.stats()
        return out

