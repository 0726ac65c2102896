"""The S3 dialect's own operations: the bucket list and ListObjectsV2 (also what GCS's
S3-interoperable XML API answers)."""
import base64
import time
import urllib.parse
from xml.sax.saxutils import escape

from fastq.bench.objserver._faults import S3_NS
from fastq.bench.objserver._store import _iso_date, _query_int


class S3Mixin:
    def _list_buckets(self, fault):
        names = self.server.owner.store.bucket_names()
        now = _iso_date(time.time())
        xml = "".join(f"<Bucket><Name>{escape(n)}</Name><CreationDate>{now}</CreationDate></Bucket>" for n in names)
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<ListAllMyBucketsResult xmlns="{S3_NS}"><Owner><ID>fastq'
                f"</ID><DisplayName>fastq</DisplayName></Owner><Buckets>{xml}</Buckets></ListAllMyBucketsResult>")
        self._send(200, [("Content-Type", "application/xml")], body.encode(), fault=fault)

    def _list(self, bucket, q, fault):
        o = self.server.owner
        prefix, delim = q.get("prefix", ""), q.get("delimiter", "")
        max_keys = _query_int(q, "max-keys", 1000, 0)
        if max_keys is None:
            return self._error(400, "InvalidArgument", "max-keys must be an integer >= 0", "/" + bucket)
        v2 = q.get("list-type") == "2"
        token = q.get("continuation-token")
        after = q.get("start-after", "") if v2 else q.get("marker", "")
        if token:
            try:
                after = base64.urlsafe_b64decode(token.encode()).decode()
            except ValueError:
                return self._error(400, "InvalidArgument", "The continuation token provided is incorrect",
                                   "/" + bucket)
        enc = q.get("encoding-type") == "url"

        def e(s):
            return escape(urllib.parse.quote_plus(s, safe="/") if enc else s)
        entries = self._entries(bucket, prefix, delim, after)
        page, truncated = entries[:max_keys], len(entries) > max_keys
        parts = [f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{S3_NS}">',
                 f"<Name>{escape(bucket)}</Name><Prefix>{e(prefix)}</Prefix>"]
        if v2:
            parts.append(f"<KeyCount>{len(page)}</KeyCount>")
        else:
            parts.append(f"<Marker>{e(after)}</Marker>")
        parts.append(f"<MaxKeys>{max_keys}</MaxKeys>")
        if delim:
            parts.append(f"<Delimiter>{e(delim)}</Delimiter>")
        if enc:
            parts.append("<EncodingType>url</EncodingType>")
        parts.append(f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>")
        if v2 and token:
            parts.append(f"<ContinuationToken>{escape(token)}</ContinuationToken>")
        if v2 and q.get("start-after"):
            parts.append(f"<StartAfter>{e(q['start-after'])}</StartAfter>")
        if truncated:
            nxt = base64.urlsafe_b64encode(page[-1][0].encode()).decode()
            parts.append(f"<NextContinuationToken>{nxt}</NextContinuationToken>" if v2
                         else f"<NextMarker>{e(page[-1][0])}</NextMarker>")
        for n, obj in page:
            if obj is None:
                parts.append(f"<CommonPrefixes><Prefix>{e(n)}</Prefix></CommonPrefixes>")
            else:
                parts.append(f"<Contents><Key>{e(n)}</Key><LastModified>{_iso_date(obj.mtime)}</LastModified>"
                             f"<ETag>{escape(obj.etag)}</ETag><Size>{obj.size}</Size>"
                             f"<StorageClass>STANDARD</StorageClass></Contents>")
        parts.append("</ListBucketResult>")
        self._send(200, [("Content-Type", "application/xml")], "".join(parts).encode(), fault=fault)

