"""The data a benchmark reads: a generated set of ImageNet-like JPEGs (built once
and cached), image files found from a folder / glob / list, or TFRecord shards
(:class:`TFRecordInput` in the parent process, :class:`TFRecordData` and the
pure-Python reader :class:`PyRecords` in a peer's process)."""
import glob
import json
import os
import re
import sys
import time

from fastq.tfrecord_codec import parse_example

__all__ = ["BenchInputError", "GENERATED", "IMAGE_EXTENSIONS", "default_data_dir", "generated_dataset", "find_images",
           "find_tfrecords", "TFRecordInput", "TFRecordData", "PyRecords"]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".ppm", ".pgm", ".pnm")


class BenchInputError(ValueError):
    """Bad benchmark input (missing folder, no images, too few images...)."""



def default_data_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fastq", "bench_data")


class _NoBar:
    """Stands in for a tqdm bar when progress is off or tqdm is not installed."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass

    def set_postfix_str(self, s):
        pass


def _progress_bar(total, desc, enabled):
    try:
        from tqdm import tqdm
    except ImportError:  # progress bars are optional
        return _NoBar()
    if not enabled:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit="img" if "JPEG" in desc else "run", leave=False,
                file=sys.stderr, dynamic_ncols=True)


def _write(msg, out):
    """Print a line without breaking an active tqdm bar."""
    if out is not print:
        return out(msg)
    try:
        from tqdm import tqdm
    except ImportError:
        return print(msg, flush=True)
    tqdm.write(msg, file=sys.stdout)
    sys.stdout.flush()


# The generated sets: name -> (folder prefix, default size, testdata function, what it is).
GENERATED = {
    "jpeg": ("jpeg", 2000, "make_jpeg_dataset", "ImageNet-like JPEGs, 300-800 px, quality 90"),
    "hires": ("hires", 300, "make_hires_dataset", "camera-like JPEGs, 1800-3200 px, noise, quality 92"),
    "dense": ("dense", 512, "make_dense_dataset", "COCO-like JPEGs, 360-640 px, with boxes and label maps"),
}


def generated_dataset(n, data_dir=None, *, progress=True, out=print, kind="jpeg"):
    """Paths of n generated JPEGs (fastq.bench.testdata, seed 0; ``kind`` names one of
    GENERATED), built once in data_dir/<prefix>_<n>_seed0 and reused while its
    MANIFEST.json matches."""
    if kind not in GENERATED:
        raise BenchInputError(f"unknown generated set {kind!r} (one of {', '.join(GENERATED)})")
    prefix, _, fn, what = GENERATED[kind]
    d = os.path.join(data_dir or default_data_dir(), f"{prefix}_{n}_seed0")
    manifest = os.path.join(d, "MANIFEST.json")
    try:
        with open(manifest) as f:
            m = json.load(f)
        paths = [os.path.join(d, p) for p in m["files"]]
        if len(paths) == n and all(os.path.getsize(p) == s for p, s in zip(paths, m["sizes"])):
            return paths
    except (OSError, ValueError, KeyError):
        pass
    from fastq.bench import testdata
    out(f"building {n} {what} in {d} (fastq.bench.testdata, seed 0) ...")
    t = time.perf_counter()
    with _progress_bar(n, "generating JPEGs", progress) as bar:
        paths = getattr(testdata, fn)(d, n, seed=0, progress=lambda i: bar.update(1))
    with open(manifest, "w") as f:
        json.dump({"files": [os.path.basename(p) for p in paths],
                   "sizes": [os.path.getsize(p) for p in paths],
                   "photos": [os.path.basename(p) for p in testdata.source_photos()]}, f)
    out(f"  done in {time.perf_counter() - t:.1f} s")
    return paths


def _is_image(p):
    return p.lower().endswith(IMAGE_EXTENSIONS) and os.path.isfile(p)


def find_images(spec):
    """Image paths from a folder (searched recursively), a glob pattern, or a
    text file listing one path per line (relative paths are relative to the
    list's folder).  Sorted; raises BenchInputError with the reason."""
    if any(c in spec for c in "*?["):
        found = sorted(p for p in glob.glob(spec, recursive=True) if _is_image(p))
        if not found:
            raise BenchInputError(f"no image files ({', '.join(IMAGE_EXTENSIONS)}) match {spec!r}")
        return found
    if not os.path.exists(spec):
        raise BenchInputError(f"{spec}: no such file or folder")
    if os.path.isdir(spec):
        found = []
        for root, dirs, files in os.walk(spec):
            dirs.sort()
            found += [os.path.join(root, f) for f in files if f.lower().endswith(IMAGE_EXTENSIONS)]
        if not found:
            raise BenchInputError(f"no image files ({', '.join(IMAGE_EXTENSIONS)}) found under {spec}")
        return sorted(found)
    if spec.lower().endswith(IMAGE_EXTENSIONS):
        return [spec]
    base = os.path.dirname(os.path.abspath(spec))
    try:
        with open(spec, encoding="utf-8") as f:
            lines = [ln.strip() for ln in f]
    except (OSError, UnicodeDecodeError) as e:
        raise BenchInputError(f"{spec}: cannot read it as a file list ({e})") from None
    paths = [ln if os.path.isabs(ln) else os.path.normpath(os.path.join(base, ln))
             for ln in lines if ln and not ln.startswith("#")]
    if not paths:
        raise BenchInputError(f"{spec}: the file list is empty")
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise BenchInputError(f"{spec}: {len(missing)} listed file(s) do not exist, first: {missing[0]}")
    return paths


# TFRecord shard names: TF's ImageNet scripts write "train-00000-of-01024"; others
# use a .tfrecord / .tfrecords / .tfrec extension.
TFRECORD_EXTENSIONS = (".tfrecord", ".tfrecords", ".tfrec")
_SHARD_NAME = re.compile(r"-\d+-of-\d+$")


def _is_shard_name(p):
    name = os.path.basename(p)
    return name.lower().endswith(TFRECORD_EXTENSIONS) or bool(_SHARD_NAME.search(name))


def find_tfrecords(spec):
    """TFRecord shard paths (sorted) if `spec` names TFRecord shards: a glob whose
    matches are all shard files, a shard file, or a folder (searched recursively)
    holding shard files and no image files.  None otherwise."""
    if any(c in spec for c in "*?["):
        found = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
        return found if found and all(_is_shard_name(p) for p in found) else None
    if os.path.isfile(spec):
        return [spec] if _is_shard_name(spec) else None
    if os.path.isdir(spec):
        shards, images = [], False
        for root, dirs, files in os.walk(spec):
            dirs.sort()
            shards += [os.path.join(root, f) for f in files if _is_shard_name(f)]
            images = images or any(f.lower().endswith(IMAGE_EXTENSIONS) for f in files)
        return sorted(shards) if shards and not images else None
    return None


class TFRecordInput:
    """The records a benchmark reads from TFRecord shards: the first `images`
    records in shard order (all by default), indexed once here with fastq's
    framing scanner (lengths and CRCs of the framing only).

    Attributes: shards (those that hold chosen records), offsets / framed (per
    shard: record offsets and framed sizes), records, all_jpeg (whether every
    image checked -- the first 256 records -- is a JPEG, which picks tf.data's
    decode_and_crop_jpeg path)."""

    def __init__(self, shards, images=None, image_key="image/encoded", label_key="image/class/label"):
        from fastq._native import _image
        self.image_key, self.label_key = image_key, label_key
        self.all_shards = list(shards)
        self.shards, self.offsets, self.framed = [], [], []
        left = images if images else None
        total = 0
        for path in self.all_shards:
            try:
                offs, lens, tail = _image.tfrecord_scan(path)
            except (OSError, ValueError, RuntimeError) as e:
                raise BenchInputError(f"{path}: cannot read it as a TFRecord shard ({e})") from None
            if tail is not None:
                raise BenchInputError(f"{path}: not a valid TFRecord shard after record {len(offs)}: {tail[1]}")
            total += len(offs)
            if left is not None:
                offs, lens = offs[:left], lens[:left]
                left -= len(offs)
            if len(offs):
                self.shards.append(path)
                self.offsets.append([int(o) for o in offs])
                self.framed.append([int(n) + 16 for n in lens])
        self.total = total
        self.records = sum(len(o) for o in self.offsets)
        if not self.records:
            raise BenchInputError(f"the TFRecord shards hold no records: {', '.join(self.all_shards)}")
        checked = 0
        self.all_jpeg = True
        with open(self.shards[0], "rb") as f:
            for off, framed in zip(self.offsets[0][:256], self.framed[0][:256]):
                f.seek(off + 12)
                ex = parse_example(f.read(framed - 16), {image_key, label_key})
                where = f"{self.shards[0]}: record {checked}"
                if not ex.get(image_key) or not ex.get(label_key):
                    raise BenchInputError(f"{where}: the tf.train.Example has no {image_key!r} bytes feature or "
                                          f"no {label_key!r} int64 feature")
                self.all_jpeg = self.all_jpeg and ex[image_key][0][:3] == b"\xff\xd8\xff"
                checked += 1

    def __len__(self):
        return self.records

    def write_index(self, folder):
        """One DALI-style text index per shard ("offset framed_size" per line) -> paths."""
        out = []
        for k, (offs, framed) in enumerate(zip(self.offsets, self.framed)):
            p = os.path.join(folder, f"shard{k:05d}.idx")
            with open(p, "w") as f:
                f.writelines(f"{o} {n}\n" for o, n in zip(offs, framed))
            out.append(p)
        return out


# ---------------------------------------------------------------------------
# TFRecord input (``fastq bench SHARDS``)
# ---------------------------------------------------------------------------

class TFRecordData:
    """The records one benchmark epoch reads from TFRecord shards: the first
    ``records`` records in shard order, located by one DALI-style text index
    per shard (``offset framed_size`` per line, written by the parent)."""

    def __init__(self, shards, index_files, records, all_jpeg, image_key, label_key):
        self.shards, self.index_files, self.records = list(shards), list(index_files), int(records)
        self.all_jpeg, self.image_key, self.label_key = all_jpeg, image_key, label_key

    def __len__(self):
        return self.records

    def locations(self):
        """[(shard number, payload offset, payload length)] for every record, in order."""
        out = []
        for k, idx in enumerate(self.index_files):
            with open(idx) as f:
                for line in f:
                    off, framed = (int(x) for x in line.split()[:2])
                    out.append((k, off + 12, framed - 16))
        return out


class PyRecords:
    """Records read with plain Python (os.pread on the shards, thread-safe), the
    Example parsed by :func:`parse_example`: how the cv2 peers read TFRecord."""

    def __init__(self, data):
        self.data = data
        self.fds = [os.open(p, os.O_RDONLY) for p in data.shards]
        self.locs = data.locations()
        self.keys = {data.image_key, data.label_key}

    def __len__(self):
        return len(self.locs)

    def read(self, i):
        """(encoded image bytes, label) of record i."""
        k, off, ln = self.locs[i]
        buf = os.pread(self.fds[k], ln, off)
        if len(buf) != ln:
            raise RuntimeError(f"{self.data.shards[k]}: short read of the record at offset {off}")
        ex = parse_example(buf, self.keys)
        img, lab = ex.get(self.data.image_key), ex.get(self.data.label_key)
        if not img or not lab:
            raise RuntimeError(f"{self.data.shards[k]}: the record at offset {off} has no "
                               f"{self.data.image_key!r} / {self.data.label_key!r}")
        return img[0], lab[0]

    def where(self, i):
        k, off, _ = self.locs[i]
        return f"{self.data.shards[k]} (record at offset {off - 12})"

    def close(self):
        for fd in self.fds:
            os.close(fd)
