"""Independent reference for the native image path, used by tests/ops/test_ops.py and
tests/image/test_decode.py: replays the parameters recorded in an explain dict with
opencv-python (pip cv2, its own statically linked OpenCV and libjpeg-turbo) and numpy.

Nothing here imports fastq's compiled code.  The reference flips immediately (the
native code defers flips into the final write), computes the affine matrix from the
sampled angle/translate/scale/shear itself, and does colour math in numpy where the
native code uses lookup tables.
"""
import math
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:  # run from anywhere: make the in-place build importable
    sys.path.insert(0, ROOT)

import cv2  # noqa: E402

BORDER = {"constant": cv2.BORDER_CONSTANT, "edge": cv2.BORDER_REPLICATE, "replicate": cv2.BORDER_REPLICATE,
          "reflect": cv2.BORDER_REFLECT_101, "symmetric": cv2.BORDER_REFLECT}
INTERP = {"nearest": cv2.INTER_NEAREST, "bilinear": cv2.INTER_LINEAR, "bicubic": cv2.INTER_CUBIC,
          "area": cv2.INTER_AREA, "lanczos": cv2.INTER_LANCZOS4}


def cv2_decode_rgb(data, gray=False):
    """Full decode with pip cv2, as RGB (or gray)."""
    flag = cv2.IMREAD_GRAYSCALE if gray else cv2.IMREAD_COLOR
    img = cv2.imdecode(np.frombuffer(data, np.uint8), flag | cv2.IMREAD_IGNORE_ORIENTATION)
    assert img is not None
    return img if gray else cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def affine_matrix(h, w, angle, tx, ty, scale, shx, shy):
    """Forward 2x3 matrix: dst = R Sh s (src - c) + c + t, c = ((w-1)/2, (h-1)/2)."""
    a = math.radians(angle)
    R = np.array([[math.cos(a), math.sin(a), 0], [-math.sin(a), math.cos(a), 0], [0, 0, 1]])
    Sh = np.array([[1, math.tan(math.radians(shx)), 0], [math.tan(math.radians(shy)), 1, 0], [0, 0, 1]])
    S = np.diag([scale, scale, 1.0])
    cx, cy = (w - 1) / 2, (h - 1) / 2
    T1 = np.array([[1, 0, cx + tx], [0, 1, cy + ty], [0, 0, 1]])
    T0 = np.array([[1, 0, -cx], [0, 1, -cy], [0, 0, 1]])
    return (T1 @ R @ Sh @ S @ T0)[:2]


def _gray(img):
    return img[:, :, 0] if img.shape[2] == 1 else cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)


def _jitter(img, rec):
    for name in rec["order"]:
        f = rec[name]
        c = img.shape[2]
        if name == "brightness":
            img = np.clip(np.rint(img.astype(np.float64) * f), 0, 255).astype(np.uint8)
        elif name == "contrast":
            mean = float(_gray(img).astype(np.float64).mean())
            # equal when contrast runs first; after hue (where OpenCV builds differ by
            # one level) it may drift a little
            assert abs(mean - rec["contrast_mean"]) < 0.5, (mean, rec["contrast_mean"])
            img = np.clip(np.rint(img.astype(np.float64) * f + (1 - f) * mean), 0, 255).astype(np.uint8)
        elif name == "saturation" and c == 3:
            g3 = cv2.cvtColor(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)
            img = cv2.addWeighted(img, f, g3, 1 - f, 0)
        elif name == "hue" and c == 3:
            shift = int(math.floor(abs(f) * 256 + 0.5)) * (1 if f >= 0 else -1)
            shift %= 256
            if shift:
                hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV_FULL)
                hsv[:, :, 0] = ((hsv[:, :, 0].astype(np.int32) + shift) % 256).astype(np.uint8)
                img = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB_FULL)
        img = img.reshape(img.shape[0], img.shape[1], c)
    return img


def replay(src, explain, ops):
    """Apply the recorded parameters of ``explain`` for the chain ``ops`` (fastq.ops
    objects) to the full-resolution source ``src`` (HxWxC uint8, C = output channels).
    Returns the uint8 HxWxC image before the final normalize/dtype/layout step."""
    from fastq import ops as O

    img = src if src.ndim == 3 else src[:, :, None]
    chain = [o for o in ops if not isinstance(o, O.Normalize)]
    assert len(chain) == len(explain["ops"])
    for op, rec in zip(chain, explain["ops"]):
        assert rec["in_shape"] == img.shape[:2], (rec, img.shape)
        c = img.shape[2]
        if isinstance(op, O.RandomResizedCrop):
            x, y, w, h = rec["box"]
            img = cv2.resize(img[y:y + h, x:x + w], op.size[::-1], interpolation=INTERP[op.interpolation])
        elif isinstance(op, O.Resize):
            oh, ow = rec["out_shape"]
            if (oh, ow) != img.shape[:2]:
                img = cv2.resize(img, (ow, oh), interpolation=INTERP[op.interpolation])
        elif isinstance(op, O.CenterCrop):
            x, y, w, h = rec["box"]
            H, W = img.shape[:2]
            pl, pt = max(0, -x), max(0, -y)
            pr, pb = max(0, x + w - W), max(0, y + h - H)
            padded = np.pad(img, ((pt, pb), (pl, pr), (0, 0)))
            img = padded[y + pt:y + pt + h, x + pl:x + pl + w]
        elif isinstance(op, O.RandomCrop):
            l, t, r, b = rec["pad"]
            if l or t or r or b:
                img = cv2.copyMakeBorder(img, t, b, l, r, BORDER[op.padding_mode], value=op.fill)
            x, y, w, h = rec["box"]
            img = img[y:y + h, x:x + w]
        elif isinstance(op, O.HorizontalFlip):
            if rec["applied"]:
                img = img[:, ::-1]
        elif isinstance(op, O.VerticalFlip):
            if rec["applied"]:
                img = img[::-1]
        elif isinstance(op, O.Grayscale):
            if rec["applied"] and c == 3:
                img = cv2.cvtColor(cv2.cvtColor(np.ascontiguousarray(img), cv2.COLOR_RGB2GRAY),
                                   cv2.COLOR_GRAY2RGB)
        elif isinstance(op, O.ColorJitter):
            img = _jitter(np.ascontiguousarray(img), rec)
        elif isinstance(op, O.RandomAffine):
            H, W = img.shape[:2]
            M = affine_matrix(H, W, rec["angle"], *rec["translate"], rec["scale"], *rec["shear"])
            np.testing.assert_allclose(np.array(rec["matrix"]), M, rtol=0, atol=1e-9)
            img = cv2.warpAffine(np.ascontiguousarray(img), M, (W, H), flags=INTERP[op.interpolation],
                                 borderMode=BORDER[op.border], borderValue=op.fill)
        else:  # pragma: no cover
            raise AssertionError(f"no reference for {op!r}")
        img = np.ascontiguousarray(img).reshape(img.shape[0], img.shape[1], c)
        assert rec["out_shape"] == img.shape[:2], (rec, img.shape)
    return img


def finish(img, ops, dtype="float32", layout="NHWC"):
    """Reference for the fused write: Normalize (or x/255) in float64, then dtype/layout."""
    from fastq import ops as O

    norm = [o for o in ops if isinstance(o, O.Normalize)]
    c = img.shape[2]
    if dtype == "uint8":
        out = img
    else:
        x = img.astype(np.float64) / 255.0
        if norm:
            mean = np.array(norm[0].mean[:c])
            std = np.array(norm[0].std[:c])
            x = (x - mean) / std
        out = x.astype(np.float32)
        if dtype == "float16":
            out = out.astype(np.float16)
    if layout == "NCHW":
        out = np.ascontiguousarray(out.transpose(2, 0, 1))
    return out
