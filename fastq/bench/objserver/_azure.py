"""mode "azure": the Blob service operations object_store's Azure client makes (written
from Microsoft's REST API reference)."""
import base64
import time
from xml.sax.saxutils import escape

from fastq.bench.objserver._store import _http_date, _query_int


class AzureMixin:
    def _azure(self, method, container, key, q, body, path, fault):
        """mode "azure": the Blob service operations object_store's Azure client makes."""
        o = self.server.owner
        if not container or not o.store.has_bucket(container):
            return self._error(404, "ContainerNotFound", "The specified container does not exist.", path,
                               head=method == "HEAD", fault=fault)
        if not key:
            if method == "GET" and q.get("restype") == "container" and q.get("comp") == "list":
                return self._azure_list(container, q, fault)
            return self._error(405, "UnsupportedHttpVerb", "not supported by this server", path)
        if f"{container}/{key}" in o.denied:
            o._count("denied")
            return self._error(403, "AuthorizationPermissionMismatch", "This request is not authorized.", path,
                               head=method == "HEAD", fault=fault)
        if method in ("GET", "HEAD"):
            return self._get_object(container, key, path, head=method == "HEAD", fault=fault)
        if method == "DELETE":
            o.store.delete(container, key)
            return self._send(202)
        if method != "PUT":
            return self._error(405, "UnsupportedHttpVerb", "not supported by this server", path)
        comp = q.get("comp")
        if comp == "block":  # Put Block: kept until Put Block List names it
            with o._lock:
                o._blocks.setdefault((container, key), {})[q.get("blockid", "")] = body
            o._count("bytes_received", len(body))
            return self._send(201)
        if comp == "blocklist":  # Put Block List: the blob is the named blocks, in order
            import xml.etree.ElementTree as ET
            try:
                ids = [e.text or "" for e in ET.fromstring(body) if e.tag in ("Latest", "Committed", "Uncommitted")]
            except ET.ParseError as e:
                return self._error(400, "InvalidXmlDocument", f"block list: {e}", path)
            with o._lock:
                blocks = o._blocks.pop((container, key), {})
            if any(i not in blocks for i in ids):
                return self._error(400, "InvalidBlockList", "The specified block list is invalid.", path)
            etag = o.store.put(container, key, b"".join(blocks[i] for i in ids))
            return self._send(201, [("ETag", etag), ("Last-Modified", _http_date(time.time()))])
        if comp is not None:
            return self._error(400, "InvalidQueryParameterValue", f"comp={comp} is not supported", path)
        if self._put_refused(o.store.get(container, key)):
            return self._error(412, "ConditionNotMet", "The condition specified using HTTP conditional header(s) "
                                                       "is not met.", path)
        etag = o.store.put(container, key, body)
        o._count("bytes_received", len(body))
        return self._send(201, [("ETag", etag), ("Last-Modified", _http_date(time.time()))])

    def _azure_list(self, container, q, fault):
        """List Blobs: EnumerationResults, the prefixes (BlobPrefix) before the blobs."""
        o = self.server.owner
        prefix, delim = q.get("prefix", ""), q.get("delimiter", "")
        limit = _query_int(q, "maxresults", 5000, 1)
        if limit is None:
            return self._error(400, "OutOfRangeQueryParameterValue", "maxresults must be >= 1", "/" + container)
        after = ""
        if q.get("marker"):
            try:
                after = base64.urlsafe_b64decode(q["marker"].encode()).decode()
            except ValueError:
                return self._error(400, "OutOfRangeInput", "The marker is not valid.", "/" + container)
        entries = self._entries(container, prefix, delim, after)
        page, truncated = entries[:limit], len(entries) > limit
        parts = [f'<?xml version="1.0" encoding="utf-8"?>\n<EnumerationResults ServiceEndpoint="{self.server.owner.endpoint}/" '
                 f'ContainerName="{escape(container)}"><Prefix>{escape(prefix)}</Prefix>'
                 f"<MaxResults>{limit}</MaxResults>"]
        if delim:
            parts.append(f"<Delimiter>{escape(delim)}</Delimiter>")
        parts.append("<Blobs>")
        parts += [f"<BlobPrefix><Name>{escape(n)}</Name></BlobPrefix>" for n, ob in page if ob is None]
        parts += [f"<Blob><Name>{escape(n)}</Name><Properties><Last-Modified>{_http_date(ob.mtime)}</Last-Modified>"
                  f"<Etag>{escape(ob.etag)}</Etag><Content-Length>{ob.size}</Content-Length>"
                  f"<Content-Type>application/octet-stream</Content-Type><BlobType>BlockBlob</BlobType>"
                  f"</Properties></Blob>" for n, ob in page if ob is not None]
        parts.append("</Blobs>")
        nxt = base64.urlsafe_b64encode(page[-1][0].encode()).decode() if truncated else ""
        parts.append(f"<NextMarker>{nxt}</NextMarker></EnumerationResults>")
        self._send(200, [("Content-Type", "application/xml")], "".join(parts).encode(), fault=fault)
