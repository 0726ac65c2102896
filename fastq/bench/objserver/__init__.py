"""A small S3-compatible HTTP server for tests and benchmarks, standard library only.

It serves a local folder (``root/<bucket>/<key>``: each top-level folder is a bucket) or
an in-memory dict (``{"bucket/key": bytes}``) at ``http://127.0.0.1:PORT/<bucket>/<key>``
(path-style addressing), well enough for obstore (``S3Store(..., endpoint=...,
virtual_hosted_style_request=False)``, ``client_options={"allow_http": True}``) and boto3:

* ``GET`` object, with ``Range: bytes=a-b`` / ``a-`` / ``-n`` (206 + ``Content-Range``; 416
  InvalidRange when the range starts past the end); ``HEAD`` (Content-Length, ETag = MD5 as S3
  gives it for a single-part object, Last-Modified); ``If-Match`` (412 when it differs) and
  ``If-None-Match`` (304 on GET/HEAD when it matches; 412 on PUT, so ``If-None-Match: *``
  is a create-only write);
* ListObjectsV2 (``GET /<bucket>?list-type=2&prefix=&delimiter=&continuation-token=&max-keys=
  &start-after=&encoding-type=url``), CommonPrefixes, pagination (max-keys default 1000); the
  bucket list (``GET /``), HeadBucket, CreateBucket (``PUT /<bucket>``);
* ``PUT`` object (plain, ``Transfer-Encoding: chunked`` or ``aws-chunked`` bodies), ``DELETE``;
* errors as S3's XML: 404 NoSuchKey / NoSuchBucket, 403 AccessDenied for the keys in
  ``denied`` ("bucket/key"), 503 SlowDown, 500 InternalError.

Any ``Authorization`` header (AWS SigV4 or none) is accepted and never checked.  ``mode="http"``
is a plain HTTP file server instead (``http://127.0.0.1:PORT/<path>``: GET / HEAD / Range only).
``mode="azure"`` speaks the part of Azure Blob Storage's REST API that object_store uses, at
the address of the Azurite emulator (``http://127.0.0.1:PORT/<account>/<container>/<blob>``;
containers are the buckets, any account name): Get Blob / Get Blob Properties (ranges in
``x-ms-range`` or ``Range``, conditions and faults as above), List Blobs (``?restype=container&comp=list&prefix=&delimiter=
&marker=&maxresults=``, ``EnumerationResults`` XML), Put Blob, Put Block + Put Block List
(multipart uploads) and Delete Blob.  Written from Microsoft's REST API reference; it is not
Azurite, so it shows that fastq's ``az://`` path works with object_store's Azure client, not
that every Azure quirk is covered.

Faults (:class:`Faults`), changeable while serving with :meth:`ObjectServer.set_faults`:
a fixed latency per request (an ``Event.wait``: no lock held, requests overlap), a fraction of
requests answered 503 SlowDown or 500, connection resets (headers and half the body, then an
RST), truncated bodies (the full Content-Length announced, half the body sent, then a clean
close), stalls (headers, then nothing for ``stall_s`` seconds, then the body) and ``dead`` (the
listening socket is closed and open connections are cut: clients get "connection refused"
until ``dead`` is set back).  Which fault a request gets comes from one ``random.Random(seed)``
draw per eligible request, so a run makes the same number of each fault for the same number of
requests (which request gets which depends on the order concurrent requests arrive in).

Speed: one thread per connection (``ThreadingHTTPServer``), HTTP/1.1 keep-alive, TCP_NODELAY,
a listen backlog of 512, header and body handed to the kernel in one ``sendmsg`` (memory) or
``socket.sendfile`` (files), ETags cached.  The server still costs ~0.1-1 ms of CPU per request
in Python: measure its raw rate in the same run as whatever it serves
(:func:`measure_raw_rate`).

    with ObjectServer("/data", latency_ms=20) as srv:     # root/<bucket>/<key>
        os.environ.update(srv.env())                       # AWS_ENDPOINT_URL=... for any client
        store = obstore.store.S3Store("bucket", **srv.obstore_config())

    python -m fastq.bench.objserver --root DIR [--port N] [--latency-ms 20] [--mode http]

Modules: _faults.py (Faults, the limits), _store.py (what is served), _handler.py (requests, and
what every dialect shares), _s3.py (S3's listing, also what GCS's XML API answers), _azure.py
(Azure Blob's own operations), _server.py (ObjectServer, ObjectServerProcess, measure_raw_rate,
the command line).
"""
from fastq.bench.objserver._faults import MAX_STALL_S, Faults
from fastq.bench.objserver._server import ObjectServer, ObjectServerProcess, main, measure_raw_rate  # noqa: F401  (main: python -m)

__all__ = ["Faults", "ObjectServer", "ObjectServerProcess", "MAX_STALL_S", "measure_raw_rate"]
