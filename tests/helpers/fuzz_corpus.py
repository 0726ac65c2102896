"""Mutated image corpus and a pipeline runner for tests/image/test_fuzz_decode.py
(also runnable as a script to print the counts: ``python3 tests/helpers/fuzz_corpus.py``).

Seeds are small crops of a bundled photo encoded by pip cv2 as baseline JPEG (4:2:0,
4:2:2, 4:4:4, gray, quality 20, optimised Huffman, restart intervals), progressive
JPEG, PNG and WebP.  JPEG mutants are structural (DQT or DHT segments removed,
sampling factors of the frame header changed, dimensions changed, restart interval
and restart markers changed) or byte-level (flipped bytes, truncation); PNG and
WebP mutants are byte-level.  Everything is deterministic from the seed.
"""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import cv2  # noqa: E402

import fastq  # noqa: E402
import fastq.ops  # noqa: E402
from fastq.bench import testdata  # noqa: E402
from fastq.errors import FastqError  # noqa: E402

OPS = [fastq.ops.RandomResizedCrop(24), fastq.ops.HorizontalFlip()]


def _photo(h=64, w=80):
    photos = dict(testdata._load_photos(cv2))
    base = photos.get("chelsea.png", next(iter(photos.values())))
    y, x = base.shape[0] // 3, base.shape[1] // 3
    return np.ascontiguousarray(base[y:y + h, x:x + w])


def seeds():
    """{name: encoded bytes}"""
    img = _photo()
    gray = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    J = cv2.IMWRITE_JPEG_QUALITY
    S = cv2.IMWRITE_JPEG_SAMPLING_FACTOR

    def enc(ext, a, params=()):
        ok, e = cv2.imencode(ext, a, list(params))
        assert ok
        return e.tobytes()

    return {
        "jpeg420": enc(".jpg", img, [J, 90]),
        "jpeg422": enc(".jpg", img, [J, 90, S, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422]),
        "jpeg444": enc(".jpg", img, [J, 90, S, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444]),
        "jpeg_q20": enc(".jpg", img, [J, 20]),
        "jpeg_opt": enc(".jpg", img, [J, 85, cv2.IMWRITE_JPEG_OPTIMIZE, 1]),
        "jpeg_rst": enc(".jpg", img, [J, 90, cv2.IMWRITE_JPEG_RST_INTERVAL, 2]),
        "jpeg_gray": enc(".jpg", gray, [J, 90]),
        "jpeg_prog": enc(".jpg", img, [J, 90, cv2.IMWRITE_JPEG_PROGRESSIVE, 1]),
        "png": enc(".png", img),
        "webp": enc(".webp", img, [cv2.IMWRITE_WEBP_QUALITY, 80]),
    }


def segments(data):
    """[(marker, start, end)] of the JPEG segments before the first SOS (end
    exclusive, including the marker bytes), plus SOS itself."""
    out = []
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            break
        m = data[i + 1]
        n = (data[i + 2] << 8) | data[i + 3]
        out.append((m, i, i + 2 + n))
        if m == 0xDA:
            break
        i += 2 + n
    return out


def drop(data, marker, which=None):
    segs = [s for s in segments(data) if s[0] == marker]
    if which is not None:
        segs = segs[which:which + 1]
    b = bytearray(data)
    for _, a, e in reversed(segs):
        del b[a:e]
    return bytes(b)


def set_sampling(data, factors):
    """Rewrite the frame header's per-component sampling factors ((h, v), ...)."""
    b = bytearray(data)
    for m, a, _ in segments(data):
        if m in (0xC0, 0xC1, 0xC2):
            nc = b[a + 9]
            for c in range(min(nc, len(factors))):
                h, v = factors[c]
                b[a + 10 + 3 * c + 1] = (h << 4) | v
            return bytes(b)
    raise ValueError("no SOF")


def set_dims(data, h, w):
    b = bytearray(data)
    for m, a, _ in segments(data):
        if m in (0xC0, 0xC1, 0xC2):
            b[a + 5:a + 7] = int(h).to_bytes(2, "big")
            b[a + 7:a + 9] = int(w).to_bytes(2, "big")
            return bytes(b)
    raise ValueError("no SOF")


def mutate_restart(data, rng):
    b = bytearray(data)
    segs = segments(data)
    dri = [s for s in segs if s[0] == 0xDD]
    if dri and rng.random() < 0.5:
        a = dri[0][1]
        b[a + 4:a + 6] = int(rng.integers(0, 8)).to_bytes(2, "big")
        return bytes(b)
    rst = [i for i in range(segs[-1][2], len(b) - 1) if b[i] == 0xFF and 0xD0 <= b[i + 1] <= 0xD7]
    if rst:
        i = rst[int(rng.integers(len(rst)))]
        b[i + 1] = 0xD0 + (b[i + 1] - 0xD0 + 1 + int(rng.integers(6))) % 8
    return bytes(b)


def flip_bytes(data, rng, lo=0):
    b = bytearray(data)
    for _ in range(int(rng.integers(1, 9))):
        b[int(rng.integers(lo, len(b)))] = int(rng.integers(0, 256))
    return bytes(b)


def mutants(seed=0, per_seed=12):
    """[(name, bytes)]: every seed, its structural mutants and `per_seed`
    random ones (a mix of all mutation kinds)."""
    rng = np.random.default_rng(seed)
    out = []
    for name, data in seeds().items():
        out.append((name, data))
        is_jpeg = name.startswith("jpeg")
        if is_jpeg:
            out.append((f"{name}-noDQT", drop(data, 0xDB)))
            out.append((f"{name}-noDHT", drop(data, 0xC4)))
            out.append((f"{name}-noDHT0", drop(data, 0xC4, 0)))
        for k in range(per_seed):
            kind = int(rng.integers(0, 6 if is_jpeg else 2))
            if kind == 0:
                m = data[:int(rng.integers(len(data) // 4, len(data)))]
            elif kind == 1:
                m = flip_bytes(data, rng, lo=2)
            elif kind == 2:
                f = [(int(rng.integers(1, 5)), int(rng.integers(1, 5))) for _ in range(3)]
                m = set_sampling(data, f)
            elif kind == 3:
                m = set_dims(data, rng.integers(1, 200), rng.integers(1, 200))
            elif kind == 4:
                m = mutate_restart(data, rng)
            else:
                m = flip_bytes(drop(data, int(rng.choice([0xDB, 0xC4]))), rng, lo=2)
            out.append((f"{name}-m{k}-{kind}", m))
    return out


def write(corpus, d):
    os.makedirs(d, exist_ok=True)
    paths = []
    for i, (name, data) in enumerate(corpus):
        p = os.path.join(d, f"{i:04d}-{name}.img")
        with open(p, "wb") as f:
            f.write(data)
        paths.append(p)
    return paths


def run(paths, workers, *, shuffle=False, queue_size=4, ops=None):
    """Decode every file through a fresh Pipeline (batch 1, on_error="raise";
    after a failure the epoch is resumed past the failed sample).  shuffle=True
    visits the files in another order (same outputs: a sample's augmentation
    depends on its index, not its position); ops: the chain (default OPS).
    Returns {path: ("ok", bytes) | ("error", class name, message, index, path)}."""
    p = fastq.Pipeline(fastq.sources.Files(paths), batch_size=1, queue_size=queue_size, workers=workers,
                       ops=OPS if ops is None else ops, dtype="uint8", seed=3, shuffle=shuffle, return_index=True,
                       stall_timeout=60)
    out = {}
    pos = 0
    try:
        while pos < len(paths):
            p.load_state_dict({"epoch": 0, "position": pos})
            try:
                for x, i in p:
                    out[paths[int(i[0])]] = ("ok", x.tobytes())
                    pos += 1
            except FastqError as e:
                out[paths[e.index]] = ("error", type(e).__name__, str(e), e.index, e.path)
                pos += 1
    finally:
        p.close()
    assert len(out) == len(paths)
    return out


def compare(paths, runs):
    """Counts over the corpus: samples whose outcome differs between runs, and
    errors that do not name their sample and file."""
    nondet = [p for p in paths if len({repr(r[p]) for r in runs}) > 1]
    unnamed = []
    for r in runs:
        for i, p in enumerate(paths):
            o = r[p]
            if o[0] == "error" and (o[4] != p or p not in o[2] or "sample" not in o[2]):
                unnamed.append((p, o))
    return nondet, unnamed


if __name__ == "__main__":
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        corpus = mutants(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
        paths = write(corpus, d)
        # crashes: run each configuration in a child process
        code = ("import sys; sys.path.insert(0, %r); from helpers import fuzz_corpus as F; "
                "F.run(%r, %d, shuffle=%r)")
        crashes = 0
        for w, rev in ((1, False), (2, False), (1, True)):
            rc = subprocess.run([sys.executable, "-c", code % (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), paths, w, rev)]).returncode
            crashes += rc != 0
        runs = [run(paths, 1), run(paths, 2), run(paths, 1), run(paths, 1, shuffle=True)]
        runs += [run(paths, 2) for _ in range(4)]  # fresh pipelines: uninitialised memory shows as differences
        nondet, unnamed = compare(paths, runs)
        n_err = sum(o[0] == "error" for o in runs[0].values())
        print(f"mutants {len(paths)}  errors {n_err}  crashed runs {crashes}  nondeterministic samples "
              f"{len(nondet)}  unnamed errors {len(unnamed)}")
        for p in nondet:
            print("  nondeterministic:", os.path.basename(p), sorted({r[p][0] + ':' + str(r[p][1])[:60] for r in runs}))
