"""COCO run-length masks and polygon filling (numpy / OpenCV; no pycocotools needed).

COCO's RLE: an h x w mask read in column-major order as alternating runs of 0s and
1s, starting with 0s (a leading run may be empty).  Its compressed string form
(``{"counts": "...", "size": [h, w]}``) stores each run as 5-bit groups, 6 bits per
character offset by 48, a continuation bit 0x20 and a sign bit 0x10 in the last
group; runs from the third on are stored as the difference to the run two before
(pycocotools' ``rleFrString``).  Decoding here is checked against pycocotools in
tests/targets/test_annotations.py.
"""
import numpy as np

__all__ = ["rle_from_string", "rle_from_object", "rle_decode", "rle_encode", "polygon_rle", "fill_polygons", "RleError"]


class RleError(ValueError):
    """A run-length mask that does not describe its image (bad characters, negative
    runs, runs that do not add up to height * width)."""


def rle_from_string(s, height, width, where="RLE"):
    """Run lengths (uint32) of a compressed COCO RLE string, checked to cover exactly
    height * width pixels."""
    if isinstance(s, bytes):
        s = s.decode("ascii", "strict")
    counts = []
    p, n = 0, len(s)
    while p < n:
        x = k = 0
        more = True
        while more:
            if p >= n:
                raise RleError(f"{where}: compressed counts end inside a run (at character {p})")
            c = ord(s[p]) - 48
            if c < 0 or c > 63:
                raise RleError(f"{where}: character {s[p]!r} at {p} is not an RLE digit")
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    return _checked(counts, height, width, where)


def _checked(counts, height, width, where):
    arr = np.asarray(counts, np.int64)
    if arr.size and arr.min() < 0:
        raise RleError(f"{where}: negative run length {int(arr.min())}")
    total = int(arr.sum())
    if total != int(height) * int(width):
        raise RleError(f"{where}: runs cover {total} pixels, the {height}x{width} mask has {int(height) * int(width)}")
    if arr.size and arr.max() > 0xFFFFFFFF:
        raise RleError(f"{where}: run length {int(arr.max())} does not fit 32 bits")
    return arr.astype(np.uint32)


def rle_from_object(seg, height, width, where="RLE"):
    """Run lengths of a COCO RLE object ``{"counts": str | list, "size": [h, w]}``."""
    size = seg.get("size")
    if size is None or len(size) != 2:
        raise RleError(f"{where}: RLE without a [height, width] size")
    h, w = int(size[0]), int(size[1])
    if (h, w) != (int(height), int(width)):
        raise RleError(f"{where}: RLE size {h}x{w} differs from the image's {height}x{width}")
    counts = seg.get("counts")
    if isinstance(counts, (str, bytes)):
        return rle_from_string(counts, h, w, where)
    if isinstance(counts, (list, tuple)) and all(isinstance(c, (int, np.integer)) for c in counts):
        return _checked(list(counts), h, w, where)
    raise RleError(f"{where}: RLE counts must be a string or a list of ints")


def rle_decode(counts, height, width):
    """The uint8 (height, width) 0/1 mask of run lengths ``counts``."""
    counts = np.asarray(counts, np.int64)
    vals = np.zeros(len(counts), np.uint8)
    vals[1::2] = 1
    flat = np.repeat(vals, counts)
    if flat.size != height * width:
        raise RleError(f"runs cover {flat.size} pixels, the mask has {height * width}")
    return np.ascontiguousarray(flat.reshape(width, height).T)


def rle_encode(mask):
    """Run lengths (uint32) of a 2-D 0/1 mask, COCO order (column-major, zeros first)."""
    flat = (np.asarray(mask).T.reshape(-1) != 0).astype(np.int8)
    change = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate(([0], change, [flat.size]))
    runs = np.diff(bounds)
    if flat.size and flat[0] == 1:
        runs = np.concatenate(([0], runs))
    return runs.astype(np.uint32)


def _trunc(a):
    """C's (int) cast of doubles (toward zero; NaN -> INT_MIN as on x86-64)."""
    a = np.asarray(a, np.float64)
    out = np.full(a.shape, np.iinfo(np.int32).min, np.int64)
    ok = np.isfinite(a)
    out[ok] = np.trunc(a[ok]).astype(np.int64)
    return out


def polygon_rle(ring, height, width):
    """Run lengths of one polygon ring rasterized the way pycocotools does
    (``rleFrPoly``: the boundary traced on a 5x finer grid, then for each pixel column
    the rows where the boundary crosses it; a pixel is inside when its centre is, up to
    that 1/5-pixel tracing), so that masks equal pycocotools' ``annToMask``."""
    h, w = int(height), int(width)
    xy = np.asarray(ring, np.float64).reshape(-1, 2)
    k = len(xy)
    if k == 0:
        return np.array([h * w], np.uint32)
    scale = 5.0
    x = _trunc(scale * xy[:, 0] + .5)
    y = _trunc(scale * xy[:, 1] + .5)
    x, y = np.append(x, x[0]), np.append(y, y[0])
    us, vs = [], []
    for j in range(k):
        xs, xe, ys, ye = int(x[j]), int(x[j + 1]), int(y[j]), int(y[j + 1])
        dx, dy = abs(xe - xs), abs(ys - ye)
        flip = (dx >= dy and xs > xe) or (dx < dy and ys > ye)
        if flip:
            xs, xe, ys, ye = xe, xs, ye, ys
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.float64(ye - ys) / dx if dx >= dy else np.float64(xe - xs) / dy
        n = dx if dx >= dy else dy
        d = np.arange(n + 1, dtype=np.int64)
        t = n - d if flip else d
        with np.errstate(invalid="ignore"):
            if dx >= dy:
                us.append(t + xs)
                vs.append(_trunc(ys + s * t + .5))
            else:
                vs.append(t + ys)
                us.append(_trunc(xs + s * t + .5))
    u, v = np.concatenate(us), np.concatenate(vs)
    j = np.flatnonzero(u[1:] != u[:-1]) + 1
    xd = np.where(u[j] < u[j - 1], u[j], u[j] - 1).astype(np.float64)
    xd = (xd + .5) / scale - .5
    keep = (np.floor(xd) == xd) & (xd >= 0) & (xd <= w - 1)
    yd = np.minimum(v[j], v[j - 1]).astype(np.float64)
    yd = np.ceil(np.clip((yd + .5) / scale - .5, 0, h))
    a = (xd[keep].astype(np.int64) * h + yd[keep].astype(np.int64)).tolist()
    a.append(h * w)
    a.sort()
    runs, prev = [], 0
    for t in a:
        runs.append(t - prev)
        prev = t
    out = [runs[0]]
    i = 1
    while i < len(runs):
        if runs[i] > 0:
            out.append(runs[i])
            i += 1
        else:
            i += 1
            if i < len(runs):
                out[-1] += runs[i]
                i += 1
    return np.asarray(out, np.uint32)


def fill_polygons(rings, height, width):
    """uint8 (height, width) 0/1 mask: the union of the polygon rings, each rasterized
    as pycocotools does (:func:`polygon_rle`)."""
    mask = np.zeros((int(height), int(width)), np.uint8)
    for ring in rings:
        mask |= rle_decode(polygon_rle(ring, height, width), height, width)
    return mask
