"""Object storage for the native sources: URLs wherever a path goes.

``s3://``, ``gs://``, ``az://`` / ``abfs://``, ``http(s)://`` URLs are read through
obstore (the Python bindings of Rust's object_store; ``pip install
"fastq-loader[cloud]"``), which handles request signing, credentials and each
cloud's standard configuration (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
``AWS_REGION``, ``AWS_ALLOW_HTTP``, ``GOOGLE_APPLICATION_CREDENTIALS``,
``AZURE_STORAGE_ACCOUNT_NAME``...).  ``file://`` URLs are plain local paths.  The GETs of
objects and shard chunks on plain ``http://`` (``http://`` URLs, ``s3://`` at an ``http://``
endpoint) go through fastq's own HTTP client instead (fastq/sources/nethttp.py,
RemoteOptions.http_client).

This module: parsing URLs, one store per bucket, listing (glob patterns and
prefixes, sorted like the local case), object metadata, and one ranged or whole
GET with fastq's retry rule.  The fetcher that keeps many GETs in flight for a
pipeline is fastq/sources/fetch.py.  See docs/cloud.md.
"""
import asyncio
import contextvars
import dataclasses
import os
import random
import re
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import unquote, urlsplit

__all__ = ["RemoteOptions", "RemoteError", "is_url", "local_path", "ObjectInfo"]

REMOTE_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "azure", "abfs", "abfss", "adl", "http", "https")


def is_url(p) -> bool:
    """True for a remote object URL (s3://, gs://, az://, abfs://, http(s)://)."""
    if isinstance(p, os.PathLike):
        return False
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if not isinstance(p, str):
        return False
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", p)
    return m is not None and m.group(1).lower() in REMOTE_SCHEMES


def local_path(p):
    """file:// URLs as local paths; anything else unchanged."""
    s = os.fsdecode(p) if isinstance(p, bytes) else p
    if isinstance(s, str) and s[:7].lower() == "file://":
        u = urlsplit(s)
        if u.netloc not in ("", "localhost"):
            raise ValueError(f"file URL {s!r}: only local files (file:///path) can be read")
        return unquote(u.path)
    return p


EVENT_LOOPS = ("auto", "uvloop", "asyncio")
HTTP_CLIENTS = ("auto", "native", "obstore")
# RemoteOptions(http_client="auto") reads natively where the native client applies
# (fastq/bench/remote.py's OTHER_CLIENT names the other client)
AUTO_NATIVE = True


def loop_name(event_loop: str = "auto") -> str:
    """The event loop RemoteOptions.event_loop selects here: "uvloop" or "asyncio"."""
    if event_loop == "asyncio":
        return "asyncio"
    try:
        import uvloop
        uvloop.run  # noqa: B018  (uvloop >= 0.18)
    except (ImportError, AttributeError):
        if event_loop == "uvloop":
            raise ImportError('RemoteOptions(event_loop="uvloop") needs uvloop >= 0.18: pip install uvloop '
                              '(or pip install "fastq-loader[cloud]")') from None
        return "asyncio"
    return "uvloop"


def run_loop(coro, event_loop: str = "auto"):
    """asyncio.run(coro) on the event loop event_loop selects (see loop_name); the native
    HTTP pools opened on that loop are closed (their threads joined) as coro ends."""
    coro = _closing_native(coro)
    if loop_name(event_loop) == "uvloop":
        import uvloop
        return uvloop.run(coro)  # asyncio.run's steps, on a uvloop loop (no policy change)
    return asyncio.run(coro)


async def _closing_native(coro):
    try:
        return await coro
    finally:
        if _NATIVE:
            from fastq.sources import nethttp
            nethttp.close_loop(asyncio.get_running_loop())


class RemoteError(OSError):
    """A remote read that failed for good: the URL, what was asked, why."""

    def __init__(self, url, what, reason, transient=False, status=None):
        self.url, self.what, self.reason, self.transient, self.status = url, what, reason, transient, status
        super().__init__(f"{what} {url}: {reason}")


@dataclasses.dataclass(frozen=True)
class RemoteOptions:
    """How a remote source reads (every field has a default meant to need no tuning).

    max_in_flight: requests at once per pipeline (64: hides 20-50 ms of latency at
        >1,000 requests/s without overloading a server; each request is one object or
        one chunk of a shard).
    max_bytes: fetched bytes held at once (in flight + waiting for the workers), the
        memory cap; ``stats()["remote"]["bytes_held"]`` reports it.
    chunk_bytes: the largest ranged read of a shard (consecutive samples are read
        together up to this size).
    gap_bytes: samples whose bytes are at most this far apart are read in one range.
    timeout_s: one request's limit (a stalled connection fails after it and is retried).
    connect_timeout_s: connection set-up limit.
    retries: attempts after the first for a transient failure (HTTP 5xx, 429, a reset
        or cut-short body, a timeout), with exponential backoff from backoff_s up to
        max_backoff_s (jittered, from seed: reproducible).
    next_epoch_bytes: once an epoch's requests are all issued, the next epoch's first
        requests are fetched ahead, up to this many bytes (None: max_bytes // 2; 0:
        never), so that an epoch boundary does not wait for the store.  Costs those
        bytes again after the last epoch.
    tune_malloc: when a shard's chunks are first fetched, keep buffers of up to twice
        chunk_bytes (at least 16 MiB, at most 32 MiB) in glibc's heap, not a fresh mapping each,
        and keep up to four times that freed at the top of a heap (``mallopt``; once per
        process, glibc only, and never when MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_
        or glibc.malloc tunables are set).  Every chunk otherwise arrives in pages the
        kernel must fault in and zero: about 6 more faults and 2-3 % more CPU per image on
        the reference task.  False leaves malloc as it is.
    first_epoch_spool: shards without an index (no sidecar, not in the index cache) are
        downloaded once to be indexed when the source is built; without ``cache_dir`` they are
        kept on local disk under spool_dir until an epoch after the first starts (or the source
        is collected), so that the first epoch reads them from there: the first epoch
        fetches each shard's bytes once.  Skipped when the spool's disk has less free space
        than twice those bytes plus 1 GiB.  False: the download is deleted once indexed.
    spool_dir: where the spool is made (None: ``~/.cache/fastq/spool``).
    event_loop: the event loop the fetcher's requests run on: "auto" (uvloop when it is
        installed, else asyncio's own; ``pip install "fastq-loader[cloud]"`` brings it),
        "uvloop" (an ImportError without it) or "asyncio".  Every object costs one
        obstore awaitable, woken by obstore's runtime threads through the loop: with uvloop
        that costs about 65 us less client CPU per object (docs/cloud.md).
    ramp: after a pipeline's first request and after a pause (nothing in flight for 0.25 s),
        requests in flight grow from 4 to max_in_flight over about 0.15 s (at most 4 more
        every 10 ms, and one more per request that ended), so that the client opens its
        connections a few at a time: a server with a short listen queue (Python's
        http.server) otherwise drops handshakes, which TCP retries after 1, 3, 7... s.
        ``stats()["remote"]["ramps"]`` counts them.  False: all at once.
    http_client: what fetches the objects' bytes (whole and ranged GETs): "auto" (the
        default: fastq's own client where it applies, obstore elsewhere), "native" (fastq's
        own HTTP/1.1 client, csrc/net: native threads, keep-alive connections, TLS through
        the OpenSSL of Python's ssl module; a ValueError naming the reason when a store is
        not one it serves) or "obstore".  The native client serves ``http://`` and
        ``https://`` URLs and ``s3://`` buckets at an ``http://`` or ``https://`` endpoint
        (path-style; unsigned, or signed with static credentials); listing, HEAD, uploads
        and every other store stay on obstore.  It costs less client CPU per object (docs/cloud.md);
        ``stats()["remote"]["http_client"]`` says which one ran.
    """

    max_in_flight: int = 64
    max_bytes: int = 512 << 20
    chunk_bytes: int = 8 << 20
    gap_bytes: int = 64 << 10
    timeout_s: float = 30.0
    connect_timeout_s: float = 5.0
    retries: int = 8
    backoff_s: float = 0.05
    max_backoff_s: float = 2.0
    seed: int = 0
    next_epoch_bytes: Optional[int] = None
    tune_malloc: bool = True
    first_epoch_spool: bool = True
    spool_dir: Optional[str] = None
    event_loop: str = "auto"
    ramp: bool = True
    http_client: str = "auto"

    def __post_init__(self):
        if self.http_client not in HTTP_CLIENTS:
            raise ValueError(f"RemoteOptions.http_client must be one of {', '.join(map(repr, HTTP_CLIENTS))}, "
                             f"got {self.http_client!r}")
        if self.event_loop not in EVENT_LOOPS:
            raise ValueError(f"RemoteOptions.event_loop must be one of {', '.join(map(repr, EVENT_LOOPS))}, "
                             f"got {self.event_loop!r}")
        if not isinstance(self.first_epoch_spool, bool):
            raise ValueError(f"RemoteOptions.first_epoch_spool must be True or False, got {self.first_epoch_spool!r}")
        if self.spool_dir is not None:
            object.__setattr__(self, "spool_dir", os.fspath(self.spool_dir))
        if not isinstance(self.ramp, bool):
            raise ValueError(f"RemoteOptions.ramp must be True or False, got {self.ramp!r}")
        if not isinstance(self.tune_malloc, bool):
            raise ValueError(f"RemoteOptions.tune_malloc must be True or False, got {self.tune_malloc!r}")
        for name in ("max_in_flight", "max_bytes", "chunk_bytes", "retries"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if name == "retries" else 1):
                raise ValueError(f"RemoteOptions.{name} must be a {'non-negative' if name == 'retries' else 'positive'} "
                                 f"int, got {v!r}")
        if self.next_epoch_bytes is not None and (not isinstance(self.next_epoch_bytes, int) or
                                                  isinstance(self.next_epoch_bytes, bool) or self.next_epoch_bytes < 0):
            raise ValueError(f"RemoteOptions.next_epoch_bytes must be None or a non-negative int, "
                             f"got {self.next_epoch_bytes!r}")
        if not isinstance(self.gap_bytes, int) or self.gap_bytes < 0:
            raise ValueError(f"RemoteOptions.gap_bytes must be a non-negative int, got {self.gap_bytes!r}")
        for name in ("timeout_s", "connect_timeout_s", "backoff_s", "max_backoff_s"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or v <= 0:
                raise ValueError(f"RemoteOptions.{name} must be a positive number, got {v!r}")
        if self.max_in_flight > 4096:
            raise ValueError(f"RemoteOptions.max_in_flight must be at most 4096, got {self.max_in_flight}")

    def backoff(self, attempt, rng):
        """Seconds to wait before retry number `attempt` (1-based)."""
        b = min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))
        return b * (0.5 + rng.random())


@dataclasses.dataclass
class ObjectInfo:
    """One object: its URL, store and key; size and ETag once known."""

    url: str
    store: Any
    key: str
    size: Optional[int] = None
    etag: Optional[str] = None


_get_async = None  # obstore.get_async once obstore is imported (fetch's hot path)


def _obstore():
    global _get_async
    try:
        import obstore
        import obstore.store  # noqa: F401
    except ImportError:
        raise ImportError('reading s3://, gs://, az:// or http(s):// URLs needs obstore: '
                          'pip install "fastq-loader[cloud]" (or pip install obstore)') from None
    _get_async = obstore.get_async
    return obstore


def split_url(url: str) -> Tuple[str, str]:
    """(store root URL, key) of an object URL: s3://bucket/a/b.jpg -> (s3://bucket, a/b.jpg);
    https://host/x/y.tar -> (https://host, x/y.tar); abfs://container@account.dfs.core.windows.net/k."""
    u = urlsplit(url)
    scheme = u.scheme.lower()
    if scheme not in REMOTE_SCHEMES:
        raise ValueError(f"not an object storage URL: {url!r}")
    if not u.netloc:
        raise ValueError(f"URL {url!r} names no bucket / host")
    if u.query or u.fragment:
        raise ValueError(f"URL {url!r}: query strings and fragments are not supported")
    return f"{scheme}://{u.netloc}", unquote(u.path.lstrip("/"))


_STORES: Dict[Tuple[str, Tuple, str], Any] = {}
_STORES_LOCK = threading.Lock()


def _freeze(d):
    return tuple(sorted((k, _freeze(v) if isinstance(v, dict) else repr(v)) for k, v in (d or {}).items()))


def _read_ca_file(path):
    """The PEM text of storage_options["ca_file"] (one or more CA certificates)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            pem = f.read()
    except OSError as e:
        raise ValueError(f"storage_options ca_file {path!r}: {e.strerror or e}") from None
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise ValueError(f"storage_options ca_file {path!r}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)")
    return pem.decode("ascii", "replace")


def get_store(root: str, storage_options: Optional[Dict[str, Any]], opts: RemoteOptions):
    """The obstore store of `root` (s3://bucket...), one per (root, options) per process.

    storage_options: the store's configuration (obstore's keys, e.g. ``endpoint``,
    ``region``, ``access_key_id``, ``skip_signature``...), overriding the environment;
    its optional ``client_options`` / ``retry_config`` entries go to obstore as such, and
    ``ca_file`` (a PEM file of CA certificates, trusted for https:// besides the system's
    roots) becomes the client option ``root_certificate``.  Retries are fastq's own (counted in stats): obstore's are turned off."""
    obstore = _obstore()
    so = dict(storage_options or {})
    client: Dict[str, Any] = {"timeout": f"{int(opts.timeout_s * 1000)}ms", "connect_timeout": f"{int(opts.connect_timeout_s * 1000)}ms",
              "pool_max_idle_per_host": str(max(opts.max_in_flight, 16))}
    # object_store reads AWS_ALLOW_HTTP into its client options only when none are given:
    # ours replace them, so carry it over (an http:// endpoint such as a local S3 server)
    if os.environ.get("AWS_ALLOW_HTTP", "").strip().lower() in ("1", "true", "yes", "on"):
        client["allow_http"] = True
    if root.split("://", 1)[0] in ("gs", "gcs"):
        # GCS has no ALLOW_HTTP variable: an http:// base URL (an emulator, a local gateway)
        # given in GOOGLE_BASE_URL or storage_options is itself the request for plain HTTP
        base = str(so.get("base_url", so.get("google_base_url", os.environ.get("GOOGLE_BASE_URL", ""))))
        if base.lower().startswith("http://"):
            client["allow_http"] = True
    for k in ("allow_http", "allow_invalid_certificates"):  # client options given at the top level
        if k in so:
            client[k] = str(so.pop(k)).strip().lower() in ("1", "true", "yes", "on")
    ca_file = so.pop("ca_file", None)
    client.update(so.pop("client_options", None) or {})
    if ca_file is not None:
        client["root_certificate"] = _read_ca_file(ca_file)
    retry = so.pop("retry_config", None) or {"max_retries": 0}
    env = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "GOOGLE_", "AZURE_", "AZURITE_"))}
    key = (root, _freeze({"so": so, "client": client, "retry": retry, "env": env}), opts.http_client)  # env: obstore reads it
    with _STORES_LOCK:
        st = _STORES.get(key)
        if st is None:
            scheme = root.split("://", 1)[0]
            if scheme in ("http", "https"):
                if scheme == "http":
                    client.setdefault("allow_http", True)  # an http:// URL asks for plain HTTP
                try:
                    st = obstore.store.HTTPStore.from_url(root, client_options=client, retry_config=retry)
                except Exception as e:  # noqa: BLE001 - obstore's configuration errors
                    raise ValueError(f"cannot configure object store {root}: {e}") from e
            else:
                _check_endpoint_env(root, so)
                try:
                    st = obstore.store.from_url(root, client_options=client, retry_config=retry, **so)
                except Exception as e:  # noqa: BLE001 - obstore's configuration errors
                    raise ValueError(f"cannot configure object store {root}: {e}") from e
            target = None
            if opts.http_client == "native" or (opts.http_client == "auto" and AUTO_NATIVE):
                from fastq.sources import nethttp
                target, why = nethttp.native_target(root, so, client)
                if target is None and opts.http_client == "native":
                    raise ValueError(f'RemoteOptions(http_client="native"): the native HTTP client cannot read '
                                     f'{root}: {why}')
            _STORES[key] = st
            if target is not None:
                _NATIVE[id(st)] = target
    return st


def _check_endpoint_env(root: str, so: Dict[str, Any]) -> None:
    """obstore lets AWS_ENDPOINT_URL_S3 from the environment replace the endpoint given in
    storage_options (AWS_ENDPOINT_URL does not): the store would list and read another
    server than the one asked for.  Refused, with both named."""
    if root.split("://", 1)[0] not in ("s3", "s3a"):
        return
    env = os.environ.get("AWS_ENDPOINT_URL_S3")
    if not env:
        return
    for k, v in so.items():
        lk = k.lower()
        lk = lk[4:] if lk.startswith("aws_") else lk
        if lk in ("endpoint", "endpoint_url") and str(v).rstrip("/") != env.rstrip("/"):
            raise ValueError(f"cannot configure object store {root}: storage_options {k}={v!r}, but the environment "
                             f"sets AWS_ENDPOINT_URL_S3={env!r}, which obstore would use instead; unset "
                             f"AWS_ENDPOINT_URL_S3 (or make the two agree)")


# id(store) -> its fastq.sources.nethttp.NativeTarget, for the stores the native client reads
# (stores live as long as the process, in _STORES)
_NATIVE: Dict[int, Any] = {}


def http_client_of(store) -> str:
    """Which client fetches store's objects: "native" or "obstore"."""
    return "native" if id(store) in _NATIVE else "obstore"


# -- errors -------------------------------------------------------------------

_STATUS = re.compile(r"(?:status(?: code)?[:= ]+|non-2xx status code: )(\d{3})", re.I)


def classify(exc) -> Tuple[bool, Optional[int], str]:
    """(transient, HTTP status or None, short reason) of an exception from obstore or asyncio."""
    import obstore.exceptions as oe
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return True, None, "timed out (stalled connection?)"
    if isinstance(exc, RemoteError):
        return exc.transient, exc.status, exc.reason
    text = str(exc)
    first = text.splitlines()[0] if text else type(exc).__name__
    if isinstance(exc, (FileNotFoundError, oe.NotFoundError)):
        return False, 404, "not found (404)"
    if isinstance(exc, (PermissionError, oe.PermissionDeniedError)):
        return False, 403, "permission denied (403)"
    if isinstance(exc, oe.UnauthenticatedError):
        return False, 401, "not authenticated (401)"
    if isinstance(exc, oe.PreconditionError):
        return False, 412, "the object changed (its ETag no longer matches)"
    if "builder error" in text:  # the HTTP client refused the request as configured (e.g. http:// not allowed)
        return False, None, f"the HTTP client cannot make this request ({first[:200]}); for an http:// endpoint " \
                            f"set AWS_ALLOW_HTTP=true or storage_options={{'allow_http': True}}"
    m = _STATUS.search(text)
    if m:
        code = int(m.group(1))
        if code == 404:
            return False, 404, "not found (404)"
        if code in (403, 401):
            return False, code, f"permission denied ({code})"
        if code == 412:
            return False, 412, "the object changed (its ETag no longer matches)"
        if code == 416:
            return False, 416, "range not satisfiable (416): the object is shorter than its index says"
        transient = code >= 500 or code in (408, 429)
        return transient, code, f"HTTP {code}" + ("" if transient else f": {first[:200]}")
    if isinstance(exc, oe.BaseError) or isinstance(exc, (ConnectionError, OSError)):
        return True, None, first[:300]  # connection reset / refused, body cut short, ...
    return False, None, f"{type(exc).__name__}: {first[:300]}"


class Counters:
    """Request counters of one source's reads (thread-safe enough: updated on one
    event loop thread; read as a snapshot)."""

    def __init__(self):
        self.requests = 0
        self.bytes = 0
        self.retries = 0
        self.failures = 0
        self.cache_hits = 0
        self.cache_misses = 0
        self.cache_bytes_written = 0

    def snapshot(self):
        return dict(vars(self))

    def add(self, other: "Counters"):
        for k, v in vars(other).items():
            setattr(self, k, getattr(self, k) + v)


# False in a task whose failures fetch() does not count: a prefetch of the next epoch (that
# epoch fetches the bytes again and reports the failure).  Set inside the task, so that a
# stats() read on another thread never sees a failure counted and not yet taken back.
COUNT_FAILURES: "contextvars.ContextVar[bool]" = contextvars.ContextVar("fastq_count_failures", default=True)


async def fetch(obj: ObjectInfo, start: Any, end: Any, opts: RemoteOptions, counters: Counters,
                rng: random.Random, pin_etag: bool = True):
    """GET bytes [start, end) of obj (start None: the whole object), retrying transient
    failures; checks the length against the range / the object's size and, when
    known, the ETag (If-Match).  Learns size and ETag from a whole GET.  Returns
    obstore's Bytes (a buffer, no copy).  Raises RemoteError."""
    get_async = _get_async or _obstore().get_async
    native = _NATIVE.get(id(obj.store)) if _NATIVE else None
    native_get: Any = (_native_get or _load_native_get()) if native is not None else None
    attempt = 0
    while True:
        try:
            counters.requests += 1
            if native is not None:  # fastq's own HTTP client (fastq/sources/nethttp.py)
                data, size, etag = await native_get(native, obj, start, end, obj.etag if pin_etag else None, opts,
                                                    _native_failure)
            else:
                options: Dict[str, Any] = {}
                if start is not None:
                    options["range"] = (start, end)
                if pin_etag and obj.etag:
                    options["if_match"] = obj.etag
                # the client's own timeout (timeout_s, get_store) bounds the whole request, body included
                res = await get_async(obj.store, obj.key, options=options)
                data = await res.bytes_async()
                meta = res.meta
                size, etag = meta.get("size"), meta.get("e_tag")
            n = len(data)
            if start is None:
                if obj.size is not None and size is not None and size != obj.size:
                    raise RemoteError(obj.url, _what(start, end), f"the object changed: {size} bytes, "
                                                                  f"{obj.size} when listed")
                if size is not None and n != size:
                    raise RemoteError(obj.url, _what(start, end), f"body cut short: {n} of {size} bytes",
                                      transient=True)
                if obj.size is None:
                    obj.size = size
            elif n != end - start:
                raise RemoteError(obj.url, _what(start, end), f"body cut short: {n} of {end - start} bytes",
                                  transient=True)
            if obj.etag is None and etag:
                obj.etag = etag
            counters.bytes += n
            return data
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - classified below
            transient, status, reason = classify(e)
            if not transient or attempt >= opts.retries:
                if COUNT_FAILURES.get():
                    counters.failures += 1
                tries = f" after {attempt + 1} attempts" if attempt else ""
                raise RemoteError(obj.url, _what(start, end), reason + tries, transient=transient,
                                  status=status) from e
            attempt += 1
            counters.retries += 1
            await asyncio.sleep(opts.backoff(attempt, rng))


_native_get: Any = None  # fastq.sources.nethttp.get, imported when a store is first read natively


def _native_failure(reason, transient, status):
    """A failed native GET, as nethttp.get raises it: fetch() classifies it and raises the
    final RemoteError with the URL and the attempts, as for obstore's errors."""
    return RemoteError("", "GET", reason, transient=transient, status=status)


def _load_native_get():
    global _native_get
    from fastq.sources import nethttp
    _native_get = nethttp.get
    return _native_get


def _what(start, end):
    return "GET" if start is None else f"GET bytes {start}-{end - 1} of"


def run_sync(coro, event_loop: str = "auto"):
    """Run a coroutine to completion from synchronous code (listing, metadata,
    index building), in a private event loop (works inside a running one too)."""
    box: Dict[str, Any] = {}

    def main():
        try:
            box["v"] = run_loop(coro, event_loop)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box["e"] = e
    t = threading.Thread(target=main, name="fastq-remote-sync", daemon=True)
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box["v"]


async def _retry(what, url, opts, counters, fn, timeout=True):
    """fn() with fastq's retry rule; timeout: bound each attempt by opts.timeout_s
    (False for uploads, whose parts the client bounds one by one)."""
    rng = random.Random(opts.seed)
    attempt = 0
    while True:
        try:
            counters.requests += 1
            return await (asyncio.wait_for(fn(), opts.timeout_s) if timeout else fn())
        except Exception as e:  # noqa: BLE001 - classified below
            transient, status, reason = classify(e)
            if not transient or attempt >= opts.retries:
                counters.failures += 1
                raise RemoteError(url, what, reason, transient=transient, status=status) from e
            attempt += 1
            counters.retries += 1
            await asyncio.sleep(opts.backoff(attempt, rng))


def put_file(url: str, path: str, storage_options, opts: RemoteOptions, counters: Counters):
    """Upload the local file at path to url (obstore's put: multipart for large
    files), retrying transient failures.  Returns its size."""
    obstore = _obstore()
    root, key = split_url(url)
    store = get_store(root, storage_options, opts)
    size = os.path.getsize(path)

    async def go():
        with open(path, "rb") as f:
            await obstore.put_async(store, key, f)
    run_sync(_retry("PUT", url, opts, counters, go, timeout=False), opts.event_loop)
    counters.bytes += size
    return size


def put_bytes(url: str, data: bytes, storage_options, opts: RemoteOptions, counters: Counters):
    obstore = _obstore()
    root, key = split_url(url)
    store = get_store(root, storage_options, opts)

    async def go():
        await obstore.put_async(store, key, data)
    run_sync(_retry("PUT", url, opts, counters, go, timeout=False), opts.event_loop)
    counters.bytes += len(data)


def _has_magic(s: str) -> bool:
    return any(c in s for c in "*?[")


async def _list_prefix(store, root, prefix, opts, counters):
    obstore = _obstore()
    out = []

    async def go():
        out.clear()
        stream = obstore.list(store, prefix=prefix or None, chunk_size=1000)
        async for batch in stream:
            out.extend(batch)
        return out
    await _retry("LIST", f"{root}/{prefix}", opts, counters, go)
    return [(m["path"], m["size"], m.get("e_tag")) for m in out]


def expand(paths, what: str, storage_options, opts: RemoteOptions, counters: Counters) -> List[ObjectInfo]:
    """Objects from a URL, a glob pattern over URLs (sorted matches, like glob.glob
    locally: ``*`` and ``?`` do not cross ``/``) or a sequence of URLs."""
    if isinstance(paths, (str, bytes)):
        paths = [os.fsdecode(paths)]
    urls = [os.fsdecode(p) for p in paths]
    out: List[ObjectInfo] = []
    for url in urls:
        root, key = split_url(url)
        store = get_store(root, storage_options, opts)
        if not _has_magic(key):
            out.append(ObjectInfo(url, store, key))
            continue
        if root.startswith("http"):
            raise ValueError(f"{what}: {url!r}: glob patterns need a listable store (s3://, gs://, az://), "
                             f"not plain HTTP")
        # object_store lists by path prefix (whole path segments): list the folder above
        # the first wildcard, then match
        fixed = re.split(r"[*?\[]", key, maxsplit=1)[0].rpartition("/")[0]
        listed = run_sync(_list_prefix(store, root, fixed, opts, counters), opts.event_loop)
        pat = re.compile(_glob_regex(key))
        hits = sorted((p, s, e) for p, s, e in listed if pat.fullmatch(p))
        if not hits:
            raise ValueError(f"{what}: the pattern {url!r} matched no object")
        out += [ObjectInfo(f"{root}/{p}", store, p, int(s), e) for p, s, e in hits]
    if not out:
        raise ValueError(f"{what}: no URLs given")
    return out


def _glob_regex(pattern: str) -> str:
    """glob.glob's rule on a key: * and ? never match '/'; [...] classes."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 2)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:j]
                neg = body[:1] == "!"
                body = body[1:] if neg else body
                out.append("[" + ("^" if neg else "") + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def list_tree(url: str, storage_options, opts: RemoteOptions, counters: Counters):
    """Every object under the prefix URL (a folder): [(key relative to it, ObjectInfo)], sorted."""
    root, key = split_url(url)
    if root.startswith("http"):
        raise ValueError(f"{url!r}: listing a folder needs a listable store (s3://, gs://, az://), not plain HTTP")
    prefix = key.rstrip("/") + "/" if key else ""
    store = get_store(root, storage_options, opts)
    listed = run_sync(_list_prefix(store, root, prefix, opts, counters), opts.event_loop)
    return sorted((p[len(prefix):], ObjectInfo(f"{root}/{p}", store, p, int(s), e)) for p, s, e in listed)


def head_all(objs: Sequence[ObjectInfo], opts: RemoteOptions, counters: Counters):
    """Fill in size and ETag of the objects that lack them (HEAD, many at once)."""
    obstore = _obstore()
    todo = [o for o in objs if o.size is None]
    if not todo:
        return

    async def main():
        sem = asyncio.Semaphore(opts.max_in_flight)

        async def one(o):
            async with sem:
                m = await _retry("HEAD", o.url, opts, counters, lambda: obstore.head_async(o.store, o.key))
                o.size, o.etag = int(m["size"]), m.get("e_tag") or o.etag
        await asyncio.gather(*(one(o) for o in todo))
    run_sync(main(), opts.event_loop)

