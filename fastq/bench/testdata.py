"""Deterministic test images built from photos that Python packages ship.

``make_jpeg_dataset`` writes ImageNet-like JPEGs (300-800 px sides, quality 90) made
by random crops and rescales of the photos bundled with scikit-image
(``skimage/data/*.png|jpg``) and scikit-learn (``sklearn/datasets/images/*.jpg``).
``make_hires_dataset`` writes camera-like JPEGs (1800-3200 px wide, sensor-like noise,
quality 92, about 1 MB each: the ``hires`` bench task).  ``make_bad_files`` writes the broken and unusual files the error paths are tested
with.  Both need ``cv2`` (``pip install opencv-python-headless``) for encoding; it is
imported lazily.  The output depends only on the arguments and the bundled photos.
"""
import os

import numpy as np

__all__ = ["source_photos", "make_jpeg_dataset", "make_hires_dataset", "make_bad_files", "BAD_FILE_ERRORS"]


def _cv2():
    try:
        import cv2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "fastq.bench.testdata needs OpenCV's Python bindings to encode images: "
            "pip install opencv-python-headless") from e
    return cv2


def source_photos():
    """Paths of the bundled photos used as material (sorted; at least 1 or raises)."""
    paths = []
    try:
        import skimage
        d = os.path.join(os.path.dirname(skimage.__file__), "data")
        if os.path.isdir(d):
            paths += [os.path.join(d, f) for f in os.listdir(d) if f.lower().endswith((".png", ".jpg"))]
    except ImportError:
        pass
    try:
        import sklearn
        d = os.path.join(os.path.dirname(sklearn.__file__), "datasets", "images")
        if os.path.isdir(d):
            paths += [os.path.join(d, f) for f in os.listdir(d) if f.lower().endswith(".jpg")]
    except ImportError:
        pass
    if not paths:
        raise RuntimeError("no bundled photos found: install scikit-image and/or scikit-learn")
    return sorted(paths)


def _load_photos(cv2, min_side=64):
    """Bundled photos as BGR uint8 (gray ones replicated), skipping tiny images."""
    out = []
    for p in source_photos():
        img = cv2.imread(p, cv2.IMREAD_COLOR)
        if img is None or min(img.shape[:2]) < min_side:
            continue
        out.append((os.path.basename(p), img))
    return out


def _flip_and_write(img, rng, out_dir, i, quality):
    """Mirror `img` with probability 0.5 (one draw of `rng`), write it as
    `out_dir/<i:06d>.jpg` at JPEG `quality`; returns the path."""
    cv2 = _cv2()
    if rng.random() < 0.5:
        img = img[:, ::-1]
    ok, enc = cv2.imencode(".jpg", np.ascontiguousarray(img), [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:  # pragma: no cover
        raise RuntimeError("cv2.imencode failed")
    p = os.path.join(out_dir, f"{i:06d}.jpg")
    with open(p, "wb") as f:
        f.write(enc.tobytes())
    return p


def cached_jpeg_dataset(n, *, min_side=300, max_side=800):
    """The paths of :func:`make_jpeg_dataset` ``(n, seed=0)``, built once into the
    system temp dir (``fastq_bench_jpegs_<n>``, ``_<min_side>`` appended when it is not
    300) and reused while that folder holds exactly ``n`` JPEGs: the microbenchmarks'
    shared input."""
    import tempfile
    d = os.path.join(tempfile.gettempdir(), f"fastq_bench_jpegs_{n}" + ("" if min_side == 300 else f"_{min_side}"))
    files = sorted(f for f in os.listdir(d) if f.endswith(".jpg")) if os.path.isdir(d) else []
    if len(files) != n:
        return make_jpeg_dataset(d, n, seed=0, min_side=min_side, max_side=max_side)
    return [os.path.join(d, f) for f in files]


def make_jpeg_dataset(out_dir, n, *, seed=0, min_side=300, max_side=800, quality=90, progress=None):
    """Write ``n`` JPEGs ``out_dir/000000.jpg ...`` and return their paths.

    Each image: a bundled photo (chosen at random), a random crop covering 35-100 % of
    its area with aspect ratio 3/4-4/3 (within the photo), resized (INTER_AREA down,
    INTER_CUBIC up) so that both sides lie in [min_side, max_side], randomly mirrored,
    encoded at ``quality``.  Deterministic from ``seed``.  ``progress(i)``, if given, is
    called after each file (i = files written so far).
    """
    cv2 = _cv2()
    if not (0 < min_side <= max_side):
        raise ValueError(f"need 0 < min_side <= max_side, got {min_side}, {max_side}")
    os.makedirs(out_dir, exist_ok=True)
    photos = _load_photos(cv2)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        _, img = photos[int(rng.integers(len(photos)))]
        H, W = img.shape[:2]
        frac = rng.uniform(0.35, 1.0)
        ar = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        cw = int(min(W, round(np.sqrt(frac * H * W * ar))))
        ch = int(min(H, round(np.sqrt(frac * H * W / ar))))
        x = int(rng.integers(0, W - cw + 1))
        y = int(rng.integers(0, H - ch + 1))
        crop = img[y:y + ch, x:x + cw]
        # output size: long side uniform in range, short side from the crop's aspect
        long_side = int(rng.integers(min_side, max_side + 1))
        if cw >= ch:
            ow, oh = long_side, max(min_side, min(max_side, round(long_side * ch / cw)))
        else:
            oh, ow = long_side, max(min_side, min(max_side, round(long_side * cw / ch)))
        interp = cv2.INTER_AREA if ow * oh < cw * ch else cv2.INTER_CUBIC
        out = cv2.resize(crop, (ow, oh), interpolation=interp)
        paths.append(_flip_and_write(out, rng, out_dir, i, quality))
        if progress is not None:
            progress(i + 1)
    return paths


def make_hires_dataset(out_dir, n, *, seed=0, min_width=1800, max_width=3200, quality=92, noise=4.0,
                       progress=None):
    """Write ``n`` camera-like JPEGs ``out_dir/000000.jpg ...`` and return their paths.

    Each image: a bundled photo (chosen at random), a random crop covering 50-100 % of
    its area with aspect 4:3, 3:2 or 16:9 (landscape, or portrait for one in four),
    upscaled (INTER_CUBIC) to a width uniform in [min_width, max_width] (the height
    from the aspect), with sensor-like noise added: gaussian, ``noise`` grey levels
    per channel plus a 2x2-correlated luma component of the same strength, so that
    the entropy-coded data is as dense as a camera's (about 1 MB at 2400 px, quality
    92).  Randomly mirrored, encoded at ``quality`` with 4:2:0 chroma.  Deterministic
    from ``seed``.  ``progress(i)``, if given, is called after each file.
    """
    cv2 = _cv2()
    if not (0 < min_width <= max_width):
        raise ValueError(f"need 0 < min_width <= max_width, got {min_width}, {max_width}")
    os.makedirs(out_dir, exist_ok=True)
    photos = _load_photos(cv2)
    rng = np.random.default_rng(seed)
    aspects = (4 / 3, 3 / 2, 16 / 9)
    paths = []
    for i in range(n):
        _, img = photos[int(rng.integers(len(photos)))]
        H, W = img.shape[:2]
        ar = aspects[int(rng.integers(len(aspects)))]
        portrait = rng.random() < 0.25
        if portrait:
            ar = 1 / ar
        frac = rng.uniform(0.5, 1.0)
        cw = int(min(W, round(np.sqrt(frac * H * W * ar))))
        ch = int(min(H, round(cw / ar)))
        cw = int(min(cw, round(ch * ar)))
        x = int(rng.integers(0, W - cw + 1))
        y = int(rng.integers(0, H - ch + 1))
        crop = img[y:y + ch, x:x + cw]
        long_side = int(rng.integers(min_width, max_width + 1))
        if portrait:
            oh, ow = long_side, max(1, round(long_side * ar))
        else:
            ow, oh = long_side, max(1, round(long_side / ar))
        out = cv2.resize(crop, (ow, oh), interpolation=cv2.INTER_CUBIC).astype(np.float32)
        out += rng.normal(0.0, noise, out.shape).astype(np.float32)
        luma = rng.normal(0.0, noise, ((oh + 1) // 2, (ow + 1) // 2, 1)).astype(np.float32)
        out += np.repeat(np.repeat(luma, 2, axis=0), 2, axis=1)[:oh, :ow]
        out = np.clip(out + 0.5, 0, 255).astype(np.uint8)
        paths.append(_flip_and_write(out, rng, out_dir, i, quality))
        if progress is not None:
            progress(i + 1)
    return paths


# What fastq should do with each file of make_bad_files(): the fastq.errors class name
# that must be raised, or None for files that must decode.  ("missing" is raised by
# the file reader, not the decoder: FQ_E_IO -> ReadError.)
BAD_FILE_ERRORS = {
    "missing": "ReadError",
    "empty": "EmptyImageError",
    "truncated": "DecodeError",
    "garbage": "DecodeError",
    "bomb": "ImageTooLargeError",
    "bomb_png": "ImageTooLargeError",
    "png": None,
    "png16": None,
    "gray_jpeg": None,
    "rgba_png": None,
    "gray_alpha_png": None,
    "cmyk_jpeg": None,
    "progressive_jpeg": None,
}


def _patch_jpeg_size(data, h, w):
    """Rewrite the frame header (SOF0/1/2) of a JPEG to declare h x w."""
    b = bytearray(data)
    i = 2
    while i + 4 < len(b):
        if b[i] != 0xFF:
            raise ValueError("bad JPEG marker layout")
        m = b[i + 1]
        seglen = (b[i + 2] << 8) | b[i + 3]
        if m in (0xC0, 0xC1, 0xC2):
            b[i + 5:i + 7] = h.to_bytes(2, "big")
            b[i + 7:i + 9] = w.to_bytes(2, "big")
            return bytes(b)
        i += 2 + seglen
    raise ValueError("no SOF marker found")


def make_bad_files(out_dir, *, seed=0):
    """Write broken / unusual image files; returns ``{name: path}``.

    Names (see ``BAD_FILE_ERRORS`` for the expected outcome): ``missing`` (path that
    does not exist), ``empty`` (0 bytes, .jpg), ``truncated`` (a JPEG cut to 40 % of
    its bytes), ``garbage`` (random bytes named .jpg), ``bomb`` (a JPEG whose header
    declares 60000x60000), ``bomb_png`` (a PNG whose IHDR declares 100000x100000),
    ``png`` (valid RGB PNG), ``png16`` (16-bit RGB PNG), ``gray_jpeg``, ``rgba_png``,
    ``progressive_jpeg``, and, when Pillow is installed, ``gray_alpha_png`` and
    ``cmyk_jpeg`` (Adobe CMYK JPEG).
    """
    cv2 = _cv2()
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    photos = dict(_load_photos(cv2))
    base = photos.get("chelsea.png")
    if base is None:
        base = next(iter(photos.values()))
    base = np.ascontiguousarray(base[:300, :400])
    files = {}

    def put(name, fname, data):
        p = os.path.join(out_dir, fname)
        with open(p, "wb") as f:
            f.write(data)
        files[name] = p

    def enc(ext, img, params=()):
        ok, e = cv2.imencode(ext, img, list(params))
        if not ok:  # pragma: no cover
            raise RuntimeError(f"cv2.imencode({ext}) failed")
        return e.tobytes()

    files["missing"] = os.path.join(out_dir, "does_not_exist.jpg")
    put("empty", "empty.jpg", b"")
    good = enc(".jpg", base, [cv2.IMWRITE_JPEG_QUALITY, 90])
    put("truncated", "truncated.jpg", good[: int(len(good) * 0.4)])
    put("garbage", "garbage.jpg", rng.integers(0, 256, 5000, dtype=np.uint8).tobytes())
    put("bomb", "bomb.jpg", _patch_jpeg_size(good, 60000, 60000))
    png = enc(".png", base)
    bomb_png = bytearray(png)
    bomb_png[16:20] = (100000).to_bytes(4, "big")
    bomb_png[20:24] = (100000).to_bytes(4, "big")
    put("bomb_png", "bomb.png", bytes(bomb_png))
    put("png", "rgb.png", png)
    put("png16", "rgb16.png", enc(".png", base.astype(np.uint16) * 257 + rng.integers(0, 200, base.shape).astype(np.uint16)))
    put("gray_jpeg", "gray.jpg", enc(".jpg", cv2.cvtColor(base, cv2.COLOR_BGR2GRAY), [cv2.IMWRITE_JPEG_QUALITY, 90]))
    alpha = rng.integers(0, 256, base.shape[:2], dtype=np.uint8)
    put("rgba_png", "rgba.png", enc(".png", np.dstack([base, alpha])))
    put("progressive_jpeg", "progressive.jpg",
        enc(".jpg", base, [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_PROGRESSIVE, 1]))
    try:
        from PIL import Image
    except ImportError:
        Image = None
    if Image is not None:
        rgb = cv2.cvtColor(base, cv2.COLOR_BGR2RGB)
        p = os.path.join(out_dir, "cmyk.jpg")
        Image.fromarray(rgb).convert("CMYK").save(p, quality=95)
        files["cmyk_jpeg"] = p
        p = os.path.join(out_dir, "gray_alpha.png")
        Image.fromarray(np.dstack([cv2.cvtColor(base, cv2.COLOR_BGR2GRAY), alpha]), "LA").save(p)
        files["gray_alpha_png"] = p
    return files


def make_dense_dataset(out_dir, n, *, seed=0, min_side=360, max_side=640, quality=90, progress=None):
    """The generated set of ``fastq bench --task detection|segmentation`` (fastq.bench.dense):
    :func:`make_jpeg_dataset` JPEGs (360-640 px, COCO / VOC-like sizes), and per image 1-8
    random boxes (xyxy pixels, classes 1-80) and a label map (21 classes in 16 px blocks,
    ``masks/<i:06d>.png``), listed in ``out_dir/dense_annotations.json``.  Deterministic
    from ``seed``; returns the image paths."""
    import json
    cv2 = _cv2()
    paths = make_jpeg_dataset(out_dir, n, seed=seed, min_side=min_side, max_side=max_side, quality=quality,
                              progress=progress)
    rng = np.random.default_rng([seed, 0xDE45E])
    os.makedirs(os.path.join(out_dir, "masks"), exist_ok=True)
    images = []
    for i, p in enumerate(paths):
        h, w = cv2.imread(p).shape[:2]
        k = int(rng.integers(1, 9))
        x0, y0 = rng.uniform(0, w * 0.8, k), rng.uniform(0, h * 0.8, k)
        b = np.stack([x0, y0, np.minimum(x0 + rng.uniform(8, w / 3, k), w),
                      np.minimum(y0 + rng.uniform(8, h / 3, k), h)], 1).astype(np.float32)
        m = rng.integers(0, 21, (h // 16 + 1, w // 16 + 1)).astype(np.uint8)
        m = cv2.resize(m, (w, h), interpolation=cv2.INTER_NEAREST)
        name = os.path.join("masks", f"{i:06d}.png")
        if not cv2.imwrite(os.path.join(out_dir, name), m):  # pragma: no cover
            raise RuntimeError("cv2.imwrite failed")
        images.append({"file": os.path.basename(p), "height": h, "width": w, "boxes": b.tolist(),
                       "classes": rng.integers(1, 81, k).tolist(), "mask": name})
    with open(os.path.join(out_dir, "dense_annotations.json"), "w") as f:
        json.dump({"images": images}, f)
    return paths
