"""Prepare an image folder for fastq (``fastq prepare SRC DST``): copy it, re-encoding every JPEG losslessly with
restart markers that tile each MCU row, so that fastq decodes a crop from only the
restart segments that cover it (docs/prepare.md).

The prepared JPEGs hold the same quantized DCT coefficients (``jpeg_read_coefficients``
-> ``jpeg_write_coefficients``, like ``jpegtran -restart N -optimize``): every decoder
gives the same pixels as for the original.  Non-JPEG files, and JPEGs the re-encode
cannot help (CMYK, tiny, already prepared, ...), are copied byte for byte.  The folder
tree is mirrored.  Reruns skip outputs that are up to date (same mtime as their
source), so an interrupted run resumes.  Work runs in threads; the native re-encode
releases the GIL.

Training-resolution copies (opt-in, lossy): with ``max_side=N`` and/or ``max_pixels=P``,
JPEGs whose longer side exceeds N (or with more than P pixels) are decoded, shrunk
(INTER_AREA, same aspect) and encoded at ``quality`` with restart markers, EXIF- and
ICC-free (fastq ignores EXIF orientation, so the pixels keep the orientation fastq
decodes the original with); JPEGs within the limits take the lossless path, other
formats are copied as they are.  Lossless is the default (docs/prepare.md).

The library API (keyword arguments after ``src, dst``)::

    prepare_tree(src, dst, interval=4, jobs=None, force=False, progress=True, on_error="raise",
                 max_side=None, max_pixels=None, quality=90)
    prepare_shards(src, dst, fmt="tfrecord", shard_size=1024, prefix="data", shuffle=None, ...,
                   max_side=None, max_pixels=None, quality=90)

:func:`prepare_shards` writes the images of a class-per-subfolder ``src`` (the order and
labels of fastq.sources.Folder) into TFRecord or WebDataset tar shards instead.  The
command (``fastq prepare``, also ``python -m fastq prepare``) is fastq/cli/prepare.py; this
library module does not import the command line.
"""
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor

from fastq.tfrecord_codec import encode_example, tfrecord_frame

__all__ = ["prepare_tree", "prepare_file", "prepare_shards", "DEFAULT_INTERVAL", "DEFAULT_QUALITY", "DEFAULT_SHARD_SIZE", "FORMATS"]

# Target restart interval in MCUs (the chosen one divides the MCUs per row); measured
# in docs/prepare.md.
DEFAULT_INTERVAL = 4
# JPEG quality of training-resolution copies (max_side / max_pixels).
DEFAULT_QUALITY = 90
_TMP_SUFFIX = ".fastq-prepare-tmp"



def _progress_bar(progress, total, unit, desc):
    """A tqdm bar when asked for and tqdm is there, else None."""
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with TensorFlow
        return None
    return tqdm(total=total, unit=unit, desc=desc, dynamic_ncols=True)


def _run_all(fn, items, jobs, bar):
    """fn(item) for every item on `jobs` threads (default: one per CPU); the first
    exception is raised once all have run; the bar is closed either way."""
    try:
        with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as ex:
            for fut in [ex.submit(fn, item) for item in items]:
                fut.result()
    finally:
        if bar is not None:
            bar.close()

def _is_jpeg(head):
    return head[:3] == b"\xff\xd8\xff"


def _resize_settings(max_side, max_pixels, quality):
    """The validated training-resolution settings: a dict, or None for lossless only."""
    if max_side is None and max_pixels is None:
        return None
    if max_side is not None and (not isinstance(max_side, int) or max_side < 1):
        raise ValueError(f"max_side must be a positive number of pixels, got {max_side!r}")
    if max_pixels is not None and (not isinstance(max_pixels, int) or max_pixels < 1):
        raise ValueError(f"max_pixels must be a positive number of pixels, got {max_pixels!r}")
    if not isinstance(quality, int) or not 1 <= quality <= 100:
        raise ValueError(f"quality must be 1-100, got {quality!r}")
    return {"max_side": max_side, "max_pixels": max_pixels, "quality": quality}


def _encode_jpeg(data, interval, resize):
    """(bytes or None to keep data, info, action) for one JPEG: "resized" (training-
    resolution copy), "rewritten" (lossless restart markers) or "kept"."""
    from fastq._native import _image
    if resize is not None:
        new, info = _image.downscale_jpeg(data, resize["max_side"] or 0, resize["max_pixels"] or 0,
                                          resize["quality"], interval)
        if new is not None:
            return new, info, "resized"
    new, info = _image.prepare_jpeg(data, interval)
    return new, info, ("rewritten" if new is not None else "kept")


def _up_to_date(src_st, dst):
    """dst is only ever created by an atomic rename after a complete write, with the
    source's mtime: an equal mtime means it was made from this version of src."""
    try:
        return os.stat(dst).st_mtime_ns == src_st.st_mtime_ns
    except FileNotFoundError:
        return False


def prepare_file(src, dst, interval=DEFAULT_INTERVAL, force=False, *, max_side=None, max_pixels=None,
                 quality=DEFAULT_QUALITY):
    """Prepare one file.  Returns (action, in_bytes, out_bytes, detail) with action one
    of "rewritten", "resized" (training-resolution copy: max_side / max_pixels),
    "kept" (JPEG copied unchanged), "copied" (not a JPEG), "skipped" (up to date).
    Writes dst atomically (temporary file + rename) and gives it the source's mtime.
    Raises fastq.errors.DecodeError for a corrupt JPEG."""
    resize = _resize_settings(max_side, max_pixels, quality)
    st = os.stat(src)
    if not force and _up_to_date(st, dst):
        return "skipped", st.st_size, os.path.getsize(dst), ""
    with open(src, "rb") as f:
        data = f.read()
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    tmp = dst + _TMP_SUFFIX
    if _is_jpeg(data):
        new, info, action = _encode_jpeg(data, interval, resize)
        if action == "resized":
            out, detail = new, f"{info['width']}x{info['height']} quality {quality}"
        elif new is not None:
            out, detail = new, f"interval {info['restart_interval']}"
        else:
            out, detail = data, info["why"]
    else:
        action, out, detail = "copied", data, ""
    try:
        with open(tmp, "wb") as f:
            f.write(out)
        shutil.copymode(src, tmp)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, dst)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return action, len(data), len(out), detail


def _walk(src):
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(_TMP_SUFFIX):
                continue
            p = os.path.join(root, name)
            yield os.path.relpath(p, src)


_RESIZE_RECORD = ".fastq-prepare-resize.json"


def _resize_record(dst, resize, done=False):
    """Before a run (done=False): whether dst was made with other training-resolution
    settings than ``resize`` (a folder without the record was made losslessly); if so,
    the record is marked incomplete until the run ends, so that an interrupted run
    forces the next one to redo everything too.  After a successful run (done=True):
    record ``resize`` (or remove the record for lossless)."""
    import json
    path = os.path.join(dst, _RESIZE_RECORD)

    def write(obj):
        tmp = path + _TMP_SUFFIX
        with open(tmp, "w") as f:
            json.dump(obj, f, sort_keys=True)
        os.replace(tmp, path)

    if done:
        if resize is None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        else:
            write(resize)
        return False
    try:
        with open(path) as f:
            old = json.load(f)
    except FileNotFoundError:
        old = None
    except ValueError:
        old = {"unreadable": True}
    if old == resize:
        return False
    os.makedirs(dst, exist_ok=True)
    write({"incomplete": True})
    return True


def prepare_tree(src, dst, *, interval=DEFAULT_INTERVAL, jobs=None, force=False, progress=True,
                 on_error="raise", max_side=None, max_pixels=None, quality=DEFAULT_QUALITY):
    """Mirror the tree under ``src`` into ``dst`` (see the module doc).  Returns a dict of
    counts and byte totals.  ``on_error="skip"`` records corrupt files in
    ``stats["errors"]`` (and copies them unchanged) instead of raising.  ``max_side`` /
    ``max_pixels`` / ``quality``: training-resolution copies (the module doc); the
    settings are recorded in ``dst/.fastq-prepare-resize.json`` and a rerun with other
    settings redoes every file."""
    from fastq.sources.storage import is_url
    resize = _resize_settings(max_side, max_pixels, quality)
    if is_url(os.fspath(dst)) or is_url(os.fspath(src)):
        raise ValueError("prepare_tree reads and writes local folders; to write to object storage use shards "
                         "(prepare_shards, `fastq prepare --format tfrecord|tar SRC s3://bucket/prefix`)")
    src = os.path.abspath(src)
    dst = os.path.abspath(dst)
    if not os.path.isdir(src):
        raise NotADirectoryError(f"source folder not found: {src}")
    if dst == src or dst.startswith(src + os.sep):
        raise ValueError(f"destination {dst} must not lie inside the source {src}")
    if interval < 1:
        raise ValueError(f"interval must be >= 1 MCU, got {interval}")
    rels = list(_walk(src))
    if _resize_record(dst, resize):
        force = True
    stats = {"files": len(rels), "rewritten": 0, "resized": 0, "kept": 0, "copied": 0, "skipped": 0, "errors": [],
             "in_bytes": 0, "out_bytes": 0, "jpeg_in_bytes": 0, "jpeg_out_bytes": 0}
    lock = threading.Lock()
    bar = _progress_bar(progress, len(rels), "file", "fastq prepare")

    def one(rel):
        from fastq import errors as E
        s, d = os.path.join(src, rel), os.path.join(dst, rel)
        try:
            action, nin, nout, _ = prepare_file(s, d, interval, force, max_side=max_side, max_pixels=max_pixels,
                                                quality=quality)
        except E.DecodeError as e:
            if on_error != "skip":
                raise E.DecodeError(f"{s}: {e}") from e
            shutil.copy2(s, d)
            with lock:
                stats["errors"].append((rel, str(e)))
            action, nin, nout = "kept", os.path.getsize(s), os.path.getsize(s)
        with lock:
            stats[action] += 1
            stats["in_bytes"] += nin
            stats["out_bytes"] += nout
            if action in ("rewritten", "resized", "kept") or (action == "skipped" and rel.lower().endswith((".jpg", ".jpeg"))):
                stats["jpeg_in_bytes"] += nin
                stats["jpeg_out_bytes"] += nout
            if bar is not None:
                bar.update(1)

    _run_all(one, rels, jobs, bar)
    _resize_record(dst, resize, done=True)
    return stats


# ---------------------------------------------------------------------------
# shard outputs: --format tfrecord | tar
# ---------------------------------------------------------------------------

MANIFEST = "fastq-prepare.json"
FORMATS = ("folder", "tfrecord", "tar")
DEFAULT_SHARD_SIZE = 1024
_IMAGE_FORMATS = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG", ".bmp": "BMP", ".webp": "WEBP",
                  ".tif": "TIFF", ".tiff": "TIFF", ".ppm": "PPM", ".pgm": "PGM", ".pnm": "PNM"}


def _image_size(data, path):
    """(height, width) of a non-JPEG image, from fastq's decoder (explain of a 1-pixel crop)."""
    from fastq._native import _image
    from fastq import ops as O
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop(1)], dtype="uint8"))
    _, ex = spec.process_encoded(data, 0, 0, 0)
    return int(ex["src_shape"][0]), int(ex["src_shape"][1])


def _prepared_image(path, interval, resize=None):
    """(bytes to store, format name, height, width) of one image: a JPEG re-encoded
    with restart markers (or kept when that cannot help; or shrunk, see
    _encode_jpeg), other formats as they are.  Raises fastq.errors.DecodeError for an
    image that does not decode."""
    with open(path, "rb") as f:
        data = f.read()
    if _is_jpeg(data):
        new, info, _ = _encode_jpeg(data, interval, resize)
        if info["width"] and info["height"]:
            return (new if new is not None else data), "JPEG", int(info["height"]), int(info["width"])
        h, w = _image_size(data, path)
        return (new if new is not None else data), "JPEG", h, w
    h, w = _image_size(data, path)
    return data, _IMAGE_FORMATS.get(os.path.splitext(path)[1].lower(), "UNKNOWN"), h, w


def _shard_name(fmt, prefix, k, n):
    return f"{prefix}-{k:05d}-of-{n:05d}" + (".tfrecord" if fmt == "tfrecord" else ".tar")


def _shard_plan(samples, interval, fmt, resize=None, rsrc=None):
    """A digest of everything that goes into one shard: rerun skips a shard whose file
    exists with the digest recorded in the manifest.  (Source objects at URLs: their
    size and ETag stand for size and mtime.)"""
    import hashlib
    h = hashlib.sha256(f"{fmt} interval={interval} v1\n".encode())
    if resize is not None:
        h.update(f"resize {resize['max_side']} {resize['max_pixels']} {resize['quality']}\n".encode())
    for key, path, rel, label, cls in samples:
        if rsrc is not None:
            stamp = rsrc.stamp(path)
        else:
            st = os.stat(path)
            stamp = f"{st.st_size}\t{st.st_mtime_ns}"
        h.update(f"{key}\t{rel}\t{label}\t{cls}\t{stamp}\n".encode())
    return h.hexdigest()


def _write_shard(fmt, out_path, samples, interval, on_error, resize=None, names=None):
    """Write one shard atomically.  Returns (records, in_bytes, out_bytes, errors)."""
    import io
    import tarfile
    from fastq import errors as E
    tmp = out_path + _TMP_SUFFIX
    n = nin = nout = 0
    errors = []
    try:
        with open(tmp, "wb") as f:
            tar = tarfile.open(fileobj=f, mode="w", format=tarfile.USTAR_FORMAT) if fmt == "tar" else None
            for key, path, rel, label, cls in samples:
                try:
                    data, kind, h, w = _prepared_image(path, interval, resize)
                except E.DecodeError as e:
                    if on_error != "skip":
                        raise E.DecodeError(f"{(names or {}).get(path, path)}: {e}") from e
                    errors.append((rel, str(e)))
                    continue
                nin += os.path.getsize(path)
                nout += len(data)
                n += 1
                if tar is None:
                    f.write(tfrecord_frame(encode_example({
                        "image/encoded": data, "image/format": kind.encode(),
                        "image/class/label": int(label), "image/class/text": cls.encode(),
                        "image/height": h, "image/width": w, "image/filename": rel.encode()})))
                    continue
                ext = "jpg" if kind == "JPEG" else os.path.splitext(path)[1].lower().lstrip(".")
                for name, payload in ((f"{key}.{ext}", data), (f"{key}.cls", str(int(label)).encode())):
                    ti = tarfile.TarInfo(name)  # fixed metadata: the same bytes on every run
                    ti.size, ti.mtime, ti.mode, ti.uid, ti.gid, ti.uname, ti.gname = \
                        len(payload), 0, 0o644, 0, 0, "", ""
                    tar.addfile(ti, io.BytesIO(payload))
            if tar is not None:
                tar.close()
        os.replace(tmp, out_path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return n, nin, nout, errors


def _tfrecord_index_text(path):
    """DALI's text index of a TFRecord file: "offset framed-size" per record."""
    import struct
    rows, off = [], 0
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        while off < size:
            f.seek(off)
            (n,) = struct.unpack("<Q", f.read(8))
            rows.append(f"{off} {n + 16}\n")
            off += n + 16
    return "".join(rows)


class _RemoteDest:
    """A prepare destination in object storage: shards are written to a local staging
    folder, uploaded with a sidecar index ``<shard>.idx`` (TFRecord: DALI's text index;
    tar: fastq's, ``webdataset.tar_index_text``), which ``TFRecord`` and ``WebDataset``
    read with ``index="sidecar"``, then deleted locally."""

    def __init__(self, url, storage_options):
        from fastq.sources import remote as R
        from fastq.sources.storage import Counters, list_tree
        self.url = url.rstrip("/")
        self.so = storage_options
        self.opts = R.options_for(None)
        self.counters = Counters()
        self.sizes = {rel: o.size for rel, o in list_tree(self.url, storage_options, self.opts, self.counters)}

    def manifest(self):
        import json
        from fastq.sources import remote as R
        if MANIFEST not in self.sizes:
            return {}
        try:
            return json.loads(R.fetch_text(f"{self.url}/{MANIFEST}", self.so, self.opts, self.counters))
        except ValueError:
            return {}

    def has(self, name, size):
        return self.sizes.get(name) == size

    def upload(self, local, name, fmt):
        from fastq.sources.storage import put_bytes, put_file
        if fmt == "tfrecord":
            put_bytes(f"{self.url}/{name}.idx", _tfrecord_index_text(local).encode(), self.so, self.opts,
                      self.counters)
        else:
            from fastq.sources.webdataset import tar_index_text
            put_bytes(f"{self.url}/{name}.idx", tar_index_text(local).encode(), self.so, self.opts, self.counters)
        put_file(f"{self.url}/{name}", local, self.so, self.opts, self.counters)
        os.unlink(local)

    def save(self, name, data):
        from fastq.sources.storage import put_bytes
        put_bytes(f"{self.url}/{name}", data, self.so, self.opts, self.counters)


def prepare_shards(src, dst, *, fmt="tfrecord", shard_size=DEFAULT_SHARD_SIZE, prefix="data",
                   interval=DEFAULT_INTERVAL, jobs=None, force=False, progress=True, on_error="raise",
                   shuffle=None, max_side=None, max_pixels=None, quality=DEFAULT_QUALITY, storage_options=None):
    """Write the images of the class-per-subfolder tree ``src`` (the files, order and
    labels of :class:`fastq.sources.Folder`) into shards of ``shard_size`` samples under
    ``dst``: ``fmt="tfrecord"`` (tf.train.Example records) or ``"tar"`` (WebDataset:
    ``<key>.<ext>`` + ``<key>.cls``), with JPEGs re-encoded as :func:`prepare_file` does.
    Shards are written atomically, in parallel; ``dst/fastq-prepare.json`` records what
    went into each, so a rerun skips the shards that are complete and up to date
    (resumable).  ``shuffle``: a seed; the samples are then written in the order of
    ``numpy.random.default_rng(seed).permutation`` of Folder's order (for streaming
    readers with small shuffle buffers).  ``max_side`` / ``max_pixels`` / ``quality``:
    training-resolution copies (the module doc).  Returns a dict of counts and byte
    totals.

    ``src`` may be a URL too (a class-per-prefix tree, as ``Folder`` reads it): each
    shard's objects are downloaded into a temporary folder while it is written; the
    shards are the ones the same tree gives locally.
    ``dst`` may be a URL (``s3://bucket/prefix``, ``gs://``, ``az://``; docs/cloud.md):
    each shard is written to a local temporary folder, uploaded, then deleted there;
    each shard gets a sidecar index ``<shard>.idx`` (TFRecord: DALI's text format; tar:
    fastq's JSON member list), which ``TFRecord(urls, index="sidecar")`` and
    ``WebDataset(urls, index="sidecar")`` read instead of downloading the shards to
    index them.  The manifest is stored at ``dst`` too, so a rerun skips the
    shards already uploaded.  ``storage_options``: as for the sources."""
    import tempfile
    from fastq.sources.storage import is_url
    resize = _resize_settings(max_side, max_pixels, quality)
    if fmt not in ("tfrecord", "tar"):
        raise ValueError(f"format must be 'tfrecord' or 'tar', got {fmt!r}")
    if shard_size < 1:
        raise ValueError(f"shard size must be >= 1, got {shard_size}")
    if interval < 1:
        raise ValueError(f"interval must be >= 1 MCU, got {interval}")
    if not prefix or os.sep in prefix or "." in prefix:
        raise ValueError(f"prefix must be a plain name without '/' or '.', got {prefix!r}")
    if is_url(os.fspath(src)):
        src = os.fspath(src).rstrip("/")
    else:
        src = os.path.abspath(src)
        if not os.path.isdir(src):
            raise NotADirectoryError(f"source folder not found: {src}")
    remote = _RemoteDest(os.fspath(dst), storage_options) if is_url(os.fspath(dst)) else None
    if remote is None and storage_options is not None:
        raise ValueError("storage_options applies to a URL destination only")
    dst = remote.url if remote is not None else os.path.abspath(dst)
    if remote is None and (dst == src or dst.startswith(src + os.sep)):
        raise ValueError(f"destination {dst} must not lie inside the source {src}")
    if is_url(dst) and (dst == src or dst.startswith(src + "/")):
        raise ValueError(f"destination {dst} must not lie inside the source {src}")
    stage = tempfile.TemporaryDirectory(prefix="fastq-prepare-") if remote is not None else None
    try:
        return _prepare_shards(src, dst, remote, stage.name if stage is not None else dst, fmt, shard_size, prefix,
                               interval, jobs, force, progress, on_error, shuffle, resize, storage_options)
    finally:
        if stage is not None:
            stage.cleanup()


class _RemoteSource:
    """A prepare source in object storage (a class-per-prefix Folder at a URL): each
    shard's objects are downloaded (many at once) into a temporary folder before the
    shard is written; a shard's digest uses the objects' sizes and ETags."""

    def __init__(self, folder):
        self.rs = folder._remote
        self.by_url = {o.url: o for o in self.rs.objects}

    def stamp(self, url):
        o = self.by_url[url]
        return f"{o.size}\t{o.etag}"

    def fetch(self, urls, into):
        """Download urls into the folder `into` -> {url: local path}."""
        import asyncio
        import random
        from fastq.sources.fetch import fill_object
        from fastq.sources.storage import run_sync
        rs = self.rs
        sem_n = max(1, min(rs.opts.max_in_flight, 32))

        async def main():
            sem = asyncio.Semaphore(sem_n)

            async def one(k, url):
                async with sem:
                    parts = await fill_object(self.by_url[url], rs.opts, rs.counters, random.Random(k))
                p = os.path.join(into, f"{k:06d}{os.path.splitext(url)[1]}")
                with open(p, "wb") as f:
                    for b in parts:
                        f.write(b)
                return url, p
            return dict(await asyncio.gather(*(one(k, u) for k, u in enumerate(urls))))
        return run_sync(main())


def _prepare_shards(src, dst, remote, out_dir, fmt, shard_size, prefix, interval, jobs, force, progress, on_error,
                    shuffle, resize, storage_options):
    import json
    from fastq.sources.folder import Folder
    from fastq.sources.storage import is_url
    rsrc = None
    if is_url(src):
        folder = Folder(src, storage_options=storage_options)
        rsrc = _RemoteSource(folder)
    else:
        folder = Folder(src)
    order = list(range(len(folder.paths)))
    if shuffle is not None:
        import numpy as np
        order = [int(i) for i in np.random.default_rng(shuffle).permutation(len(order))]
    rel_of = (lambda p: p[len(src) + 1:]) if rsrc is not None else (lambda p: os.path.relpath(p, src))
    samples = [(f"{k:08d}", folder.paths[i], rel_of(folder.paths[i]), int(folder.labels[i]),
                folder.class_names[int(folder.labels[i])]) for k, i in enumerate(order)]
    n_shards = -(-len(samples) // shard_size)
    os.makedirs(out_dir, exist_ok=True)
    mpath = os.path.join(out_dir, MANIFEST)
    try:
        if remote is not None:
            manifest = remote.manifest()
        else:
            with open(mpath) as f:
                manifest = json.load(f)
        if manifest.get("format") != fmt or manifest.get("shards_total") != n_shards or \
                manifest.get("shuffle") != shuffle:
            manifest = {}
    except (OSError, ValueError):
        manifest = {}
    done = dict(manifest.get("shards", {})) if not force else {}
    manifest = {"format": fmt, "source": src, "class_names": folder.class_names, "samples": len(samples),
                "shard_size": shard_size, "shards_total": n_shards, "interval": interval, "shuffle": shuffle,
                "shards": done}
    if resize is not None:
        manifest["resize"] = resize
    stats = {"samples": len(samples), "shards": n_shards, "written": 0, "skipped": 0, "records": 0,
             "errors": [], "jpeg_in_bytes": 0, "jpeg_out_bytes": 0, "in_bytes": 0, "out_bytes": 0,
             "class_names": folder.class_names}
    lock = threading.Lock()
    bar = _progress_bar(progress, n_shards, "shard", f"fastq prepare ({fmt})")

    def save_manifest():
        if remote is not None:
            remote.save(MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
            return
        tmp = mpath + _TMP_SUFFIX
        with open(tmp, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
        os.replace(tmp, mpath)

    def present(out, name, size):
        if remote is not None:
            return remote.has(name, size)
        return os.path.isfile(out) and os.path.getsize(out) == size

    def one(k):
        part = samples[k * shard_size:(k + 1) * shard_size]
        name = _shard_name(fmt, prefix, k, n_shards)
        out = os.path.join(out_dir, name)
        digest = _shard_plan(part, interval, fmt, resize, rsrc)
        rec = done.get(name)
        if rec and rec.get("digest") == digest and present(out, name, rec.get("bytes")):
            with lock:
                stats["skipped"] += 1
                stats["records"] += rec["records"]
                stats["in_bytes"] += rec["in_bytes"]
                stats["out_bytes"] += rec["out_bytes"]
                stats["errors"] += [tuple(e) for e in rec.get("errors", [])]
                if bar is not None:
                    bar.update(1)
            return
        if rsrc is None:
            n, nin, nout, errors = _write_shard(fmt, out, part, interval, on_error, resize)
        else:
            import tempfile
            with tempfile.TemporaryDirectory(prefix="fastq-prepare-src-") as tmp:
                local = rsrc.fetch([s[1] for s in part], tmp)
                n, nin, nout, errors = _write_shard(fmt, out, [(key, local[p], rel, label, cls)
                                                               for key, p, rel, label, cls in part],
                                                    interval, on_error, resize, {v: k for k, v in local.items()})
        size = os.path.getsize(out)
        if remote is not None:
            remote.upload(out, name, fmt)
        with lock:
            done[name] = {"digest": digest, "bytes": size, "records": n, "in_bytes": nin,
                          "out_bytes": nout, "errors": errors, "first": part[0][0]}
            save_manifest()
            stats["written"] += 1
            stats["records"] += n
            stats["in_bytes"] += nin
            stats["out_bytes"] += nout
            stats["errors"] += errors
            if bar is not None:
                bar.update(1)

    _run_all(one, range(n_shards), jobs, bar)
    with lock:
        save_manifest()
    stats["jpeg_in_bytes"], stats["jpeg_out_bytes"] = stats["in_bytes"], stats["out_bytes"]
    return stats


if __name__ == "__main__":  # the command is fastq/cli/prepare.py; a library module does not import it
    raise SystemExit("the command is `fastq prepare SRC DST` (or `python -m fastq prepare SRC DST`); "
                     "python -m fastq.prepare is no longer one")
