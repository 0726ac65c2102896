"""TFRecord and ``tf.train.Example`` in pure Python (no TensorFlow): the one
encoder, framer and parser that the rest of fastq's Python uses.

* :func:`encode_example` serializes an Example the way TF's own serializer does for
  bytes and int64 features (``fastq prepare --format tfrecord`` writes with it);
* :func:`tfrecord_frame` frames one record as ``tf.io.TFRecordWriter`` does
  (length, masked CRC-32C of the length, data, masked CRC-32C of the data; the CRC
  comes from fastq's native crc32c);
* :func:`parse_example` reads the requested features of a serialized Example
  (``fastq bench``'s Python peers read TFRecord shards with it).

The native readers (fastq.sources.TFRecord) do not use this module: they parse in C.
Both directions are checked against TensorFlow's ``tf.train.Example``,
``tf.io.parse_single_example`` and ``tf.io.TFRecordWriter`` in tests/sources/test_tfrecord_codec.py.
"""
import struct

import numpy as np

__all__ = ["encode_example", "tfrecord_frame", "parse_example"]


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------

def _varint(v):
    """Protobuf base-128 varint of a non-negative int (int64 values: two's complement)."""
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(field, payload):
    """A length-delimited protobuf field."""
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def encode_example(features):
    """Serialize a tf.train.Example from {key: bytes | int | float | [bytes] | [int] |
    [float] | numpy array} (keys in sorted order, int64 and float lists packed: what
    TF's own serializer writes for them).  A numpy array's dtype decides its list type
    (floating: float_list of float32, integer: int64_list), so an empty float feature
    is ``np.zeros(0, np.float32)``; an empty Python list is a bytes list."""
    entries = []
    for key in sorted(features):
        v = features[key]
        if isinstance(v, np.ndarray):
            if np.issubdtype(v.dtype, np.floating):
                payload = np.ascontiguousarray(v.reshape(-1), "<f4").tobytes()
                entries.append(_ld(1, _ld(1, key.encode()) + _ld(2, _ld(2, _ld(1, payload) if payload else b""))))
                continue
            if not np.issubdtype(v.dtype, np.integer):
                raise TypeError(f"feature {key!r}: a numpy array of {v.dtype} (floating or integer expected)")
            ints = b"".join(_varint(int(x)) for x in v.reshape(-1))
            entries.append(_ld(1, _ld(1, key.encode()) + _ld(2, _ld(3, _ld(1, ints) if ints else b""))))
            continue
        vals = v if isinstance(v, (list, tuple)) else [v]
        if all(isinstance(x, bytes) for x in vals):
            feature = _ld(1, b"".join(_ld(1, x) for x in vals))  # Feature.bytes_list
        elif all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in vals):
            feature = _ld(3, _ld(1, b"".join(_varint(int(x)) for x in vals)) if vals else b"")  # int64_list
        elif all(isinstance(x, (float, np.floating, int, np.integer)) and not isinstance(x, bool) for x in vals):
            payload = struct.pack(f"<{len(vals)}f", *(float(x) for x in vals))
            feature = _ld(2, _ld(1, payload))  # float_list, packed
        else:
            raise TypeError(f"feature {key!r}: bytes, int or float values expected, got {v!r}")
        entries.append(_ld(1, _ld(1, key.encode()) + _ld(2, feature)))
    return _ld(1, b"".join(entries))  # Example.features


def tfrecord_frame(record):
    """One TFRecord record: length (uint64 LE), masked CRC-32C of the length, the data,
    masked CRC-32C of the data (the framing tf.io.TFRecordWriter writes)."""
    from fastq._native import _image
    n = struct.pack("<Q", len(record))
    return n + struct.pack("<I", _image.masked_crc32c(n)) + record + struct.pack("<I", _image.masked_crc32c(record))


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------

def _read_varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, i
        shift += 7


def _fields(buf):
    """(field number, wire type, value) of one protobuf message; value is a
    memoryview for length-delimited fields, an int otherwise."""
    i, n = 0, len(buf)
    while i < n:
        tag, i = _read_varint(buf, i)
        wt = tag & 7
        if wt == 0:
            v, i = _read_varint(buf, i)
        elif wt == 1:
            v, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wt == 2:
            ln, i = _read_varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        elif wt == 5:
            v, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wt}")
        if i > n:
            raise ValueError("truncated protobuf message")
        yield tag >> 3, wt, v


def parse_example(data, keys):
    """A minimal pure-Python tf.train.Example reader (no TensorFlow): {key: value}
    for the requested keys; bytes features -> list of bytes, int64 -> list of int
    (two's complement), float -> list of float."""
    out = {}
    for f, wt, features in _fields(memoryview(data)):
        if f != 1 or wt != 2:
            continue
        for g, wt2, entry in _fields(features):
            if g != 1 or wt2 != 2:
                continue
            key, feature = None, None
            for h, _, v in _fields(entry):
                if h == 1:
                    key = bytes(v).decode()
                elif h == 2:
                    feature = v
            if key not in keys or feature is None:
                continue
            vals = []
            for kind, wt3, lst in _fields(feature):
                for h, wt4, v in _fields(lst):
                    if h != 1:
                        continue
                    if kind == 1:
                        vals.append(bytes(v))
                    elif kind == 3:
                        if wt4 == 2:
                            j = 0
                            while j < len(v):
                                x, j = _read_varint(v, j)
                                vals.append(x - (1 << 64) if x >= 1 << 63 else x)
                        else:
                            vals.append(v - (1 << 64) if v >= 1 << 63 else v)
                    elif kind == 2:
                        if wt4 == 2:
                            vals += list(struct.unpack(f"<{len(v) // 4}f", v))
                        else:
                            vals.append(struct.unpack("<f", v.to_bytes(4, "little"))[0])
            out[key] = vals
    return out
