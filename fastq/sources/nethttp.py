"""fastq's own client for ``http://`` and ``https://`` GETs (csrc/net/fq_http.h), used instead
of obstore for whole-object and ranged reads where it applies (RemoteOptions.http_client):

* ``http://`` and ``https://`` roots (obstore's HTTPStore otherwise);
* ``s3://`` buckets whose endpoint is an ``http://`` or ``https://`` URL
  (``storage_options["endpoint"]`` or ``AWS_ENDPOINT_URL``), path-style
  (``<endpoint>/<bucket>/<key>``, what obstore sends to such an endpoint), unsigned
  (``skip_signature``) or signed with static credentials (access key id, secret, optional
  session token; AWS Signature Version 4, computed here).

TLS is OpenSSL's, the libssl that Python's own ``ssl`` module runs on (:func:`tls_version`),
loaded by the C client at run time: the server's certificate is checked against the
system's roots (Python's default paths, ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``) plus
``storage_options["ca_file"]``, and must name the URL's host; ``allow_invalid_certificates``
turns the check off, as it does for obstore.

Everything else (gs, az, credential chains, virtual-hosted S3) stays on obstore, as do
listing, HEAD and uploads.  :func:`native_target` decides, once per store (get_store).

Requests run on native threads with blocking sockets and keep-alive connections; each
finished request resolves an asyncio Future on the event loop that submitted it (the pool's
eventfd is watched with ``loop.add_reader``; with :func:`gather_results`, results that keep
coming are collected on a timer instead).  One pool per store for the process's life (its
connections are reused from epoch to epoch; its threads end after a second idle), and one
channel per (event loop, store), closed when the coroutine that run_loop runs ends
(:func:`close_loop`): what it still had queued or in flight is dropped.
"""
import asyncio
import datetime
import hashlib
import hmac
import os
import threading
import time
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import quote, urlsplit

HTTP_CLIENTS = ("auto", "native", "obstore")

_TRUE = ("1", "true", "yes", "on")
_POOL_LOCK = threading.Lock()
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

# storage_options keys (lower case, "aws_" prefix removed) that the native client understands;
# any other key changes what obstore would send or how it authenticates: obstore then
_S3_KEYS = {"endpoint", "endpoint_url", "access_key_id", "secret_access_key", "session_token", "token",
            "region", "default_region", "skip_signature", "virtual_hosted_style_request", "bucket", "bucket_name",
            "allow_http", "imdsv1_fallback", "metadata_endpoint", "conditional_put", "copy_if_not_exists",
            "disable_tagging", "unsigned_payload"}
# AWS_* variables that would make obstore's GETs differ (headers, addressing, credentials)
_S3_ENV_OBSTORE = ("AWS_REQUEST_PAYER", "AWS_SSE_CUSTOMER_KEY_BASE64", "AWS_S3_EXPRESS")


def _truthy(v) -> bool:
    return str(v).strip().lower() in _TRUE


class NativeTarget:
    """Where and how one store's objects are fetched natively: the endpoint, the path of a
    key, the headers a request needs (signing)."""

    def __init__(self, host: str, port: int, prefix: str, creds=None, region="us-east-1", tls=None):
        self.host = host
        self.port = port
        default_port = 80 if tls is None else 443
        self.host_header = host if port == default_port else f"{host}:{port}"
        if ":" in host and not host.startswith("["):  # an IPv6 literal
            self.host_header = f"[{host}]" if port == default_port else f"[{host}]:{port}"
        self.tls = tls  # None (http://) or (CA certificates' PEM text or None, verify the server's)
        self.prefix = prefix  # "" or "/bucket" (path-style S3), never ending in "/"
        self.creds = creds    # None (unsigned) or (access key id, secret, session token or None)
        self.region = region
        self.paths: Dict[str, Tuple[bytes, str]] = {}
        # (day, derived signing key) and (second, x-amz-date): each replaced whole, so that
        # event loops on several threads signing at once never pair one's day with another's key
        self._day_key: Tuple[str, bytes] = ("", b"")
        self._date: Tuple[int, str] = (-1, "")
        self.clients: Dict[Any, "Client"] = {}  # event loop -> its channel
        self.pool = None  # the native pool (threads, connections), made at the first GET

    def pool_for(self, opts):
        """The target's pool (one per store, for the process's life: its connections are
        reused from epoch to epoch; its threads end when idle)."""
        if self.pool is None:
            from fastq._native._core import HttpPool
            with _POOL_LOCK:
                if self.pool is None:
                    tls = self.tls
                    self.pool = HttpPool(self.host, self.port, self.host_header, max(1, opts.max_in_flight),
                                         opts.connect_timeout_s, opts.timeout_s, tls=tls is not None,
                                         ca_pem=tls[0] if tls else None, verify=tls[1] if tls else True)
        return self.pool

    def path(self, key: str) -> Tuple[bytes, str]:
        """(the request target, as bytes; the same, as str) of key, URI-encoded as S3 and
        obstore do (every byte but A-Z a-z 0-9 - _ . ~ and /)."""
        p = self.paths.get(key)
        if p is None:
            s = self.prefix + "/" + quote(key, safe="/-_.~")
            p = self.paths[key] = (s.encode("ascii"), s)
        return p

    def sign(self, path: str) -> str:
        """The SigV4 header lines of GET path (host, x-amz-date, x-amz-content-sha256 and
        x-amz-security-token signed; Range and If-Match are not, as S3 allows)."""
        kid, secret, token = self.creds
        sec = int(time.time())
        date = self._date
        if date[0] != sec:
            date = self._date = (sec, datetime.datetime.fromtimestamp(sec, datetime.timezone.utc)
                                 .strftime("%Y%m%dT%H%M%SZ"))
        amz = date[1]
        day = amz[:8]
        day_key = self._day_key
        if day_key[0] != day:  # the derived key, once per day
            k = hmac.new(("AWS4" + secret).encode(), day.encode(), hashlib.sha256).digest()
            k = hmac.new(k, self.region.encode(), hashlib.sha256).digest()
            k = hmac.new(k, b"s3", hashlib.sha256).digest()
            day_key = self._day_key = (day, hmac.new(k, b"aws4_request", hashlib.sha256).digest())
        if token:
            signed = "host;x-amz-content-sha256;x-amz-date;x-amz-security-token"
            canon_h = (f"host:{self.host_header}\nx-amz-content-sha256:{_EMPTY_SHA256}\nx-amz-date:{amz}\n"
                       f"x-amz-security-token:{token}\n")
        else:
            signed = "host;x-amz-content-sha256;x-amz-date"
            canon_h = f"host:{self.host_header}\nx-amz-content-sha256:{_EMPTY_SHA256}\nx-amz-date:{amz}\n"
        canon = f"GET\n{path}\n\n{canon_h}\n{signed}\n{_EMPTY_SHA256}"
        scope = f"{day}/{self.region}/s3/aws4_request"
        sts = f"AWS4-HMAC-SHA256\n{amz}\n{scope}\n{hashlib.sha256(canon.encode()).hexdigest()}"
        sig = hmac.new(day_key[1], sts.encode(), hashlib.sha256).hexdigest()
        out = (f"Authorization: AWS4-HMAC-SHA256 Credential={kid}/{scope}, SignedHeaders={signed}, Signature={sig}\r\n"
               f"x-amz-content-sha256: {_EMPTY_SHA256}\r\nx-amz-date: {amz}\r\n")
        if token:
            out += f"x-amz-security-token: {token}\r\n"
        return out


_TLS: List[Optional[str]] = []  # [OpenSSL's version text, or None: not loadable] once tried
_TLS_WHY = [""]


def _libssl_candidates() -> List[str]:
    """Where the libssl of Python's ssl module is: the file mapped into this process once
    ``ssl`` is imported (its path, so that dlopen finds that same copy), then the names a
    system's loader knows."""
    try:
        import ssl  # noqa: F401 - maps Python's libssl, if _ssl links one
    except ImportError:  # a Python built without ssl: the system's libssl may still do
        pass
    out = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1] if line.count(" ") >= 5 else ""
                if "/libssl" in path and ".so" in path and path not in out:
                    out.append(path)
    except OSError:
        pass
    import ctypes.util
    found = ctypes.util.find_library("ssl")
    for name in ([found] if found else []) + ["libssl.so.3", "libssl.so.1.1"]:
        if name not in out:
            out.append(name)
    return out


def tls_version() -> Optional[str]:
    """The OpenSSL the native client speaks TLS with (its version text), loaded the first
    time it is asked for; None when none could be (:func:`tls_unavailable` says why)."""
    if not _TLS:
        with _POOL_LOCK:
            if not _TLS:
                from fastq._native._core import http_tls_load
                try:
                    _TLS.append(http_tls_load(_libssl_candidates()))
                except Exception as e:  # noqa: BLE001 - FastqError(UNSUPPORTED): said by tls_unavailable
                    _TLS_WHY[0] = str(e)
                    _TLS.append(None)
    return _TLS[0]


def tls_unavailable() -> str:
    """Why https:// cannot be native here ("" when it can)."""
    return "" if tls_version() is not None else f"the native client found no OpenSSL for TLS: {_TLS_WHY[0]}"


def _endpoint(url: str) -> Tuple[Optional[Tuple[str, int, str, bool]], str]:
    """((host, port, path prefix, https) of an http:// or https:// URL, "") or (None, why not)."""
    u = urlsplit(url)
    scheme = u.scheme.lower()
    if scheme not in ("http", "https"):
        return None, f"the endpoint {url!r} is neither http:// nor https://"
    if u.username or u.password or u.query or u.fragment or not u.hostname:
        return None, f"the endpoint {url!r} has credentials, a query or no host"
    try:
        port = u.port or (80 if scheme == "http" else 443)
    except ValueError:
        return None, f"the endpoint {url!r} has a bad port"
    if scheme == "https" and tls_unavailable():
        return None, tls_unavailable()
    return (u.hostname, port, u.path.rstrip("/"), scheme == "https"), ""


# client options the native client follows (the timeouts are RemoteOptions' own, given to both)
_CLIENT_KEYS = {"timeout", "connect_timeout", "pool_max_idle_per_host", "allow_http", "root_certificate",
                "allow_invalid_certificates"}


def _tls_of(https: bool, client: Dict[str, Any]) -> Tuple[Optional[Tuple[Optional[str], bool]], str]:
    """(NativeTarget's tls for the client options, "") or (None, why not)."""
    if not https:
        return None, ""
    ca = client.get("root_certificate")
    if ca is not None and (not isinstance(ca, str) or "-----BEGIN CERTIFICATE-----" not in ca):
        return None, "client option root_certificate is not PEM text"
    return (ca, not _truthy(client.get("allow_invalid_certificates", False))), ""


def native_target(root: str, so: Dict[str, Any], client: Dict[str, Any]) -> Tuple[Optional[NativeTarget], str]:
    """The native client's target for the store of root (None and the reason when it does
    not apply).  so: the storage options left for obstore; client: its client options."""
    scheme = root.split("://", 1)[0]
    extra = set(client) - _CLIENT_KEYS
    if scheme in ("http", "https"):
        if extra:
            return None, f"client options {sorted(extra)} are obstore's"
        ep, why = _endpoint(root)
        if ep is None:
            return None, why
        tls, why = _tls_of(ep[3], client)
        if why:
            return None, why
        return NativeTarget(ep[0], ep[1], ep[2], tls=tls), ""
    if scheme not in ("s3", "s3a"):
        return None, f"{scheme}:// stores are read through obstore"
    opts: Dict[str, Any] = {}
    for k, v in so.items():
        lk = k.lower()
        lk = lk[4:] if lk.startswith("aws_") else lk
        if lk not in _S3_KEYS:
            return None, f"storage option {k!r} is obstore's"
        opts[lk] = v
    if extra:
        return None, f"client options {sorted(extra)} are obstore's"
    env = os.environ
    for k in _S3_ENV_OBSTORE:
        if env.get(k):
            return None, f"{k} is set"
    # obstore's order: AWS_ENDPOINT_URL_S3 over everything (storage.get_store refuses it beside
    # another endpoint in storage_options), then storage_options, then the general variables
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or opts.get("endpoint", opts.get(
        "endpoint_url", env.get("AWS_ENDPOINT_URL", env.get("AWS_ENDPOINT"))))
    if not endpoint:
        return None, "the bucket has no endpoint URL (storage_options endpoint / AWS_ENDPOINT_URL[_S3])"
    ep, why = _endpoint(str(endpoint))
    if ep is None:
        return None, why
    if not ep[3] and not client.get("allow_http"):
        return None, "plain http:// is not allowed (AWS_ALLOW_HTTP / storage_options allow_http)"
    tls, why = _tls_of(ep[3], client)
    if why:
        return None, why
    vh = opts.get("virtual_hosted_style_request", env.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false"))
    if _truthy(vh):
        return None, "virtual-hosted-style requests"
    bucket = urlsplit(root).netloc
    skip = _truthy(opts.get("skip_signature", env.get("AWS_SKIP_SIGNATURE", "false")))
    region = str(opts.get("region", opts.get("default_region", env.get("AWS_REGION", env.get("AWS_DEFAULT_REGION")))) or
                 "us-east-1")
    creds = None
    if not skip:
        kid = opts.get("access_key_id", None if "secret_access_key" in opts else env.get("AWS_ACCESS_KEY_ID"))
        secret = opts.get("secret_access_key", None if "access_key_id" in opts else env.get("AWS_SECRET_ACCESS_KEY"))
        if not kid or not secret:
            return None, "no static credentials (access key id and secret) and no skip_signature: a credential chain"
        token = opts.get("session_token", opts.get("token", env.get("AWS_SESSION_TOKEN")))
        creds = (str(kid), str(secret), str(token) if token else None)
    return NativeTarget(ep[0], ep[1], ep[2] + "/" + quote(bucket, safe="-_.~"), creds, region, tls), ""


# -- the client on an event loop ------------------------------------------------------

_LOOPS: Dict[Any, Dict[int, "Client"]] = {}  # loop -> {id(target): its client}
_GATHER: Dict[Any, List[float]] = {}  # loop -> [its clients' gather interval] (gather_results)


def gather_results(loop, seconds: float) -> None:
    """Let the channels of `loop` hand their results over at most every `seconds` while
    results keep arriving, instead of waking the loop at each one (the first result after a
    quiet interval still wakes it at once); 0 turns it off.  Takes effect at the next result.
    For a loop that keeps many requests in flight and has no use for a result a few ms sooner
    (the Fetcher's, which also keeps requests queued in the pool so that its threads do not
    wait for the loop): each wake-up of a sleeping loop thread costs more CPU than the result
    it delivers."""
    _GATHER.setdefault(loop, [0.0])[0] = float(seconds)


class Client:
    """A channel of the target's pool, bound to one event loop: get() returns a Future of the
    result tuple (see fastq._native._core.HttpChannel.take)."""

    def __init__(self, loop, target: NativeTarget, opts):
        from fastq._native._core import HttpChannel
        self.loop = loop
        self.target = target
        self.chan = HttpChannel(target.pool_for(opts))
        self.fd = self.chan.fileno()
        self.futs: Dict[int, asyncio.Future] = {}
        self.next_id = 1
        # gather[0] > 0: while results keep arriving, collect them every gather[0] s instead of
        # at each one (gather_results; shared by the loop's clients); self.timer is that
        # collection while it is due
        self.gather = _GATHER.setdefault(loop, [0.0])
        self.timer: Optional[asyncio.TimerHandle] = None
        loop.add_reader(self.fd, self._ready)

    def get(self, target: bytes, headers: str) -> asyncio.Future:
        rid = self.next_id
        self.next_id += 1
        fut = self.loop.create_future()
        self.futs[rid] = fut
        try:
            self.chan.submit(rid, target, headers.encode("latin-1"))
        except BaseException:
            del self.futs[rid]
            raise
        return fut

    def _deliver(self) -> bool:
        """Resolve the futures of the results waiting; False when there were none."""
        got = self.chan.take()
        futs = self.futs
        for r in got:
            fut = futs.pop(r[0], None)
            if fut is not None and not fut.done():
                fut.set_result(r)
        return bool(got)

    def _ready(self):
        """The channel's descriptor is readable."""
        if self._deliver() and self.gather[0] > 0:
            # results are coming in: stop watching the descriptor, collect on a timer
            self.loop.remove_reader(self.fd)
            self.timer = self.loop.call_later(self.gather[0], self._gathered)

    def _gathered(self):
        self.timer = None
        if self._deliver() and self.gather[0] > 0:
            self.timer = self.loop.call_later(self.gather[0], self._gathered)
        else:  # a quiet interval, or gathering turned off: back to waking at each result
            self.loop.add_reader(self.fd, self._ready)

    def close(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        try:
            self.loop.remove_reader(self.fd)
        except Exception:  # noqa: BLE001 - the loop is closing: nothing to remove
            pass
        self.chan.close()  # drops what is queued, resets the connections of what is in flight
        for fut in self.futs.values():
            if not fut.done():
                fut.cancel()
        self.futs.clear()


def client_for(target: NativeTarget, opts) -> Client:
    loop = asyncio.get_running_loop()
    c = target.clients.get(loop)
    if c is None:
        c = Client(loop, target, opts)
        target.clients[loop] = c
        _LOOPS.setdefault(loop, {})[id(target)] = c
    return c


def close_loop(loop) -> None:
    """Close the channels opened on loop (run_loop calls this as its coroutine ends)."""
    _GATHER.pop(loop, None)
    clients = _LOOPS.pop(loop, None)
    if not clients:
        return
    for c in clients.values():
        c.target.clients.pop(loop, None)
        c.close()


# -- one GET ----------------------------------------------------------------------------

CODE_INVALID = 2  # FQ_E_INVALID: the server's certificate was refused (no retry can help)
CODE_CLOSED = 4  # FQ_E_CLOSED


async def get(target: NativeTarget, obj, start, end, if_match, opts, error):
    """One GET of bytes [start, end) of obj (start None: all) -> (buffer, the object's size
    from a whole GET or None, ETag or None).  A failed request raises
    error(reason, transient, status) (storage.fetch() passes a RemoteError maker and words the
    final error, with the URL and the attempts, as for obstore's)."""
    c = target.clients.get(asyncio.get_running_loop())
    if c is None:
        c = client_for(target, opts)
    tb, ts = target.path(obj.key)
    h = "" if start is None else f"Range: bytes={start}-{end - 1}\r\n"
    if if_match:
        h += f"If-Match: {if_match}\r\n"
    if target.creds is not None:
        h += target.sign(ts)
    _, code, status, body, clen, etag, crange, msg = await c.get(tb, h)
    if code == 0 and 200 <= status < 300 and (start is None or status == 206):
        return body, (clen if clen >= 0 else None), etag or None
    if code != 0:  # (a timeout's message starts with "timed out")
        raise error(msg, code not in (CODE_CLOSED, CODE_INVALID), None)
    if status >= 300 or status < 200:
        raise error(*_status_reason(status, body))
    if start is not None and status == 200:  # the server ignored Range: the part asked for
        if len(body) < end:
            raise error(f"body cut short: {len(body)} bytes, the range asked ends at {end}", True, None)
        return memoryview(body)[start:end], None, etag or None
    return body, (clen if clen >= 0 else None), etag or None


def _status_reason(status, body):
    """(reason, transient, status) of a non-2xx response, as classify() words them."""
    if status == 404:
        return "not found (404)", False, 404
    if status in (401, 403):
        return f"permission denied ({status})", False, status
    if status == 412:
        return "the object changed (its ETag no longer matches)", False, 412
    if status == 416:
        return "range not satisfiable (416): the object is shorter than its index says", False, 416
    transient = status >= 500 or status in (408, 429)
    if transient:
        return f"HTTP {status}", True, status
    text = bytes(memoryview(body)[:200]).decode("utf-8", "replace") if body is not None else ""
    return f"HTTP {status}: {text}", False, status
