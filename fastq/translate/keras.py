"""Keras 3 preprocessing layers -> fastq ops (docs/migrate.md, "Keras").

Each layer is mapped argument by argument onto ops whose semantics are Keras's own
(keras/src/layers/preprocessing/image_preprocessing/*.py): the same transform, the same
draw distribution per sample, the same pixel-centre convention.  A layer or an argument
value without an exact equivalent raises :class:`NotTranslatable` here; the shared core
then runs it, and every layer after it, in Python on the native prefix's output.

Geometry: RandomZoom, RandomTranslation and RandomRotation map onto fastq's Keras ops
(``fastq.ops.KerasRandomZoom`` / ``KerasRandomTranslation`` / ``KerasRandomRotation``,
csrc/image/geometry/fq_image_keras_geom.cpp): Keras's float32 draws and output->input
matrix, sampled as TF's ``ImageProjectiveTransformV3`` (pixel centres at integers; fill
modes reflect, wrap, constant, nearest; bilinear or nearest), natively on the worker
threads (``SAMPLING`` below: bilinear reflect/nearest/constant by cv::warpAffine on that
matrix, within 1/32 pixel of TF's arithmetic; wrap and nearest with TF's own); a constant ``fill_value`` must be an integer 0..255 (fastq's pixels are uint8).
Colour: RandomContrast and RandomBrightness map onto ``KerasRandomContrast`` /
``KerasRandomBrightness`` (per-image factor, each channel's own mean / an additive delta,
clipped to ``value_range``, which must be integers within 0..255).  The float32 results
are rounded half to even to uint8 between ops (Keras keeps float32).
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from fastq import ops as fops
from fastq.translate._core import NotTranslatable, Step, Translation, split_at_first_python

__all__ = ["translate", "flatten_layers"]

_FILL = ("reflect", "wrap", "constant", "nearest")
# how the Keras warps sample (fastq.ops.KerasRandomZoom's ``sampling``): "opencv" runs cv::warpAffine on
# Keras's matrix where OpenCV's borders read what TF's fill modes read (bilinear; reflect, nearest,
# constant): the same values up to OpenCV's 1/32-pixel coordinates, at a third of the CPU of "tf"
# (TF's float32 arithmetic, byte-equal to TF's result on the same image), which wrap and
# interpolation="nearest" use in any case
SAMPLING = "opencv"


def flatten_layers(layers: Any) -> List[Any]:
    """A list of layers from a layer, a list/tuple or a keras.Sequential (nested ones too)."""
    if layers is None:
        return []
    if isinstance(layers, (list, tuple)):
        out: List[Any] = []
        for l in layers:
            out += flatten_layers(l)
        return out
    try:
        import keras
        if isinstance(layers, keras.Sequential):
            return flatten_layers(list(layers.layers))
    except ImportError:  # pragma: no cover - keras is what the caller passes
        pass
    return [layers]


def _fill(layer: Any) -> Tuple[str, float]:
    mode = getattr(layer, "fill_mode", "reflect")
    if mode not in _FILL:
        raise NotTranslatable(f"fill_mode={mode!r} (fastq does {list(_FILL)})")
    fv = float(getattr(layer, "fill_value", 0.0) or 0.0)
    if mode == "constant" and not (fv.is_integer() and 0 <= fv <= 255):
        raise NotTranslatable(f"fill_value={fv!r} (fastq's fill is an integer 0..255 on uint8 pixels)")
    return mode, (fv if mode == "constant" else 0.0)


def _value_range(layer: Any) -> Tuple[float, float]:
    vr = getattr(layer, "value_range", (0, 255))
    try:
        lo, hi = sorted(float(v) for v in vr)
    except (TypeError, ValueError):
        raise NotTranslatable(f"value_range={vr!r}") from None
    if not (lo.is_integer() and hi.is_integer() and 0 <= lo < hi <= 255):
        raise NotTranslatable(f"value_range={tuple(vr)!r} (fastq clips uint8 pixels: integers within 0..255)")
    return lo, hi


def _interp(layer: Any) -> str:
    it = getattr(layer, "interpolation", "bilinear")
    if it not in ("bilinear", "nearest"):
        raise NotTranslatable(f"interpolation={it!r} (fastq warps with bilinear or nearest)")
    return it


def _floor_center_crop(size: Tuple[int, int], out: Tuple[int, int]) -> List[Any]:
    """CenterCrop ops that crop ``out`` at top ``(H-h)//2``, left ``(W-w)//2`` (Keras's
    offsets; fastq's CenterCrop rounds (H-h)/2 half to even, which differs when
    (H-h) % 4 == 3: crop one pixel larger first, then the last pixel from the far side)."""
    (H, W), (h, w) = size, out
    eh = 1 if (H - h) % 4 == 3 else 0
    ew = 1 if (W - w) % 4 == 3 else 0
    if eh or ew:
        return [fops.CenterCrop((h + eh, w + ew)), fops.CenterCrop((h, w))]
    return [fops.CenterCrop((h, w))]


class _State:
    def __init__(self, size: Optional[Tuple[int, int]], channels: int) -> None:
        self.size = size
        self.channels = channels
        self.affine: Optional[Tuple[np.ndarray, np.ndarray]] = None  # out = a * x + b per channel

    def need_size(self, what: str) -> Tuple[int, int]:
        if self.size is None:
            raise NotTranslatable(f"{what} needs the input size, unknown here (pass image_size=)")
        return self.size


def _vec(v: Any, c: int, what: str) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64).reshape(-1)
    if a.size == 1:
        return np.repeat(a, c)
    if a.size != c:
        raise NotTranslatable(f"{what} has {a.size} values for {c} channels")
    return a


def _pair(factor: Any) -> Tuple[float, float]:
    """A Keras layer's stored (lower, upper) factor as two floats."""
    lo, hi = factor
    return float(lo), float(hi)


def _layer_ops(layer: Any, st: _State) -> Tuple[List[Any], str]:
    """The ops for one layer (and what they are in words), or NotTranslatable."""
    name = type(layer).__name__
    affine_layers = ("Rescaling", "Normalization")
    if st.affine is not None and name not in affine_layers:
        raise NotTranslatable("it comes after Rescaling/Normalization, and fastq's Normalize must be the last op")
    if name == "Rescaling":
        a, b = _vec(layer.scale, st.channels, "scale"), _vec(layer.offset, st.channels, "offset")
        return _affine(st, a, b), f"x * {layer.scale} + {layer.offset}"
    if name == "Normalization":
        if getattr(layer, "invert", False):
            raise NotTranslatable("invert=True")
        import keras
        if getattr(layer, "mean", None) is not None:
            mean = np.asarray(keras.ops.convert_to_numpy(layer.mean), dtype=np.float64)
            var = np.asarray(keras.ops.convert_to_numpy(layer.variance), dtype=np.float64)
        elif getattr(layer, "input_mean", None) is not None:  # given mean/variance, layer not built yet
            mean = np.asarray(layer.input_mean, dtype=np.float64)
            var = np.asarray(layer.input_variance, dtype=np.float64)
        else:
            raise NotTranslatable("the layer has no mean/variance yet (adapt() it first)")
        if mean.ndim and (mean.reshape(-1).size not in (1, st.channels) or
                          (mean.size > 1 and mean.shape[-1] != mean.size)):
            raise NotTranslatable(f"axis={layer.axis!r} (fastq normalizes per channel, the last axis)")
        std = np.maximum(np.sqrt(_vec(var, st.channels, "variance")), float(keras.config.epsilon()))
        m = _vec(mean, st.channels, "mean")
        return _affine(st, 1.0 / std, -m / std), "(x - mean) / sqrt(variance)"
    if name == "RandomFlip":
        mode = layer.mode
        if mode == "horizontal":
            return [fops.HorizontalFlip(0.5)], ""
        if mode == "vertical":
            return [fops.VerticalFlip(0.5)], ""
        if mode == "horizontal_and_vertical":  # one draw flips both (Keras uses one mask: u <= 0.5)
            return [fops.RandomApply([fops.HorizontalFlip(1.0), fops.VerticalFlip(1.0)], p=0.5)], \
                "RandomApply([HorizontalFlip(1), VerticalFlip(1)], p=0.5): both flips on one draw, as Keras"
        raise NotTranslatable(f"mode={mode!r}")
    if name == "RandomRotation":
        mode, fill = _fill(layer)
        return [fops.KerasRandomRotation(_pair(layer.factor), fill_mode=mode,
                                         interpolation=_interp(layer), fill_value=fill, sampling=SAMPLING)], ""
    if name == "RandomZoom":
        mode, fill = _fill(layer)
        hl = (float(layer.height_lower), float(layer.height_upper))
        wl = (float(layer.width_lower), float(layer.width_upper)) if layer.width_factor is not None else None
        return [fops.KerasRandomZoom(hl, wl, fill_mode=mode, interpolation=_interp(layer), fill_value=fill,
                                     sampling=SAMPLING)], ""
    if name == "RandomTranslation":
        mode, fill = _fill(layer)
        return [fops.KerasRandomTranslation((float(layer.height_lower), float(layer.height_upper)),
                                            (float(layer.width_lower), float(layer.width_upper)), fill_mode=mode,
                                            interpolation=_interp(layer), fill_value=fill, sampling=SAMPLING)], ""
    if name == "RandomContrast":
        return [fops.KerasRandomContrast(_pair(layer.factor), value_range=_value_range(layer))], ""
    if name == "RandomBrightness":
        return [fops.KerasRandomBrightness(_pair(layer.factor), value_range=_value_range(layer))], ""
    if name == "RandomCrop":
        H, W = st.need_size("RandomCrop")
        h, w = int(layer.height), int(layer.width)
        if (H, W) == (h, w):
            return [], "(nothing to do: the input has the crop's size)"
        if not (H > h and W > w):  # Keras then crops to the aspect ratio and resizes
            raise NotTranslatable(f"input {H}x{W} not larger than the crop {h}x{w} in both sides "
                                  "(Keras then crops to the aspect ratio and resizes)")
        st.size = (h, w)
        return [fops.RandomCrop((h, w))], ""
    if name == "CenterCrop":
        H, W = st.need_size("CenterCrop")
        h, w = int(layer.height), int(layer.width)
        if H < h or W < w:
            raise NotTranslatable(f"input {H}x{W} smaller than the crop {h}x{w} (Keras then resizes)")
        st.size = (h, w)
        if (H, W) == (h, w):
            return [], "(nothing to do: the input has the crop's size)"
        return _floor_center_crop((H, W), (h, w)), ""
    if name == "Resizing":
        if layer.interpolation != "bilinear":
            raise NotTranslatable(f"interpolation={layer.interpolation!r} (only bilinear matches tf.image.resize)")
        if getattr(layer, "antialias", False):
            raise NotTranslatable("antialias=True")
        if layer.crop_to_aspect_ratio or layer.pad_to_aspect_ratio:
            raise NotTranslatable("crop_to_aspect_ratio/pad_to_aspect_ratio")
        st.size = (int(layer.height), int(layer.width))
        return [fops.Resize(st.size, interpolation="bilinear")], ""
    if name == "RandomGrayscale":
        if st.channels != 3:
            raise NotTranslatable("one-channel input")
        return [fops.Grayscale(p=float(layer.factor))], ""
    if name in ("RandomColorJitter", "RandAugment"):
        reasons = {
            "RandomColorJitter": "its saturation and hue are Keras's own float HSV arithmetic (no fastq op yet)",
            "RandAugment": "Keras's RandAugment has its own op list and float arithmetic (fastq's are torchvision's/TF's)",
        }
        raise NotTranslatable(reasons[name])
    raise NotTranslatable(f"no fastq equivalent for {name}")


def _affine(st: _State, a: np.ndarray, b: np.ndarray) -> List[Any]:
    new = (a, b) if st.affine is None else (a * st.affine[0], a * st.affine[1] + b)  # a2 (a1 x + b1) + b2
    if not np.all(new[0] > 0):
        raise NotTranslatable("a non-positive overall scale (fastq's Normalize needs std > 0)")
    st.affine = new
    return []  # the Normalize is added once, after the walk


def normalize_op(affine: Optional[Tuple[np.ndarray, np.ndarray]]) -> Any:
    """Normalize giving ``a * x + b`` on 0..255 values (identity when None)."""
    if affine is None:
        return fops.Normalize(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), max_pixel_value=1.0)
    a, b = affine
    std = 1.0 / a
    mean = -b * std
    if mean.size == 1:
        mean, std = np.repeat(mean, 3), np.repeat(std, 3)
    return fops.Normalize(mean=tuple(float(v) for v in mean[:3]) if mean.size >= 3 else tuple([float(mean[0])] * 3),
                          std=tuple(float(v) for v in std[:3]) if std.size >= 3 else tuple([float(std[0])] * 3),
                          max_pixel_value=1.0)


def _run_keras_layer(layer: Any, x: Any, seed: int) -> Any:
    """One Keras layer on one sample in training mode; an image preprocessing layer draws
    from a SeedGenerator seeded from the sample (reproducible for any number of workers)."""
    import keras
    from keras.src.layers.preprocessing.image_preprocessing.base_image_preprocessing_layer import \
        BaseImagePreprocessingLayer
    if isinstance(layer, BaseImagePreprocessingLayer):
        gen = keras.random.SeedGenerator(seed)
        t = layer.get_random_transformation(x, training=True, seed=gen)
        return layer.transform_images(x, t, training=True)
    try:
        return layer(x, training=True)
    except TypeError:
        return layer(x)


def make_tail(layers: Sequence[Any], channels_first: bool, affine_done: bool):
    """The Python tail: the untranslated layers on one sample (float32, 0..255 or after
    the native Rescaling/Normalization), in the dataset's data_format."""
    import keras

    def tail(image: np.ndarray, label: Any):
        x = np.asarray(image, dtype=np.float32)
        if channels_first:
            x = np.ascontiguousarray(x.transpose(2, 0, 1))
        seed = int(np.random.randint(0, 2 ** 31 - 1))  # the core seeds numpy per (seed, epoch, index)
        for k, layer in enumerate(layers):
            x = _run_keras_layer(layer, x, seed + k)
        return np.asarray(keras.ops.convert_to_numpy(x), dtype=np.float32), label

    return tail


def translate(layers: Any, strict: bool = False, *, image_size: Optional[Tuple[int, int]] = None,
              channels: int = 3, data_format: str = "channels_last", head: Sequence[Step] = ()) -> Translation:
    """A :class:`Translation` of Keras preprocessing layers (a list, or a keras.Sequential).

    ``image_size``: the (height, width) entering the first layer when it is known (the
    loader's image_size); CenterCrop and RandomCrop need it.  ``head``: steps that come
    first (the loader's decode + resize).  Output: float32, the Keras values (0..255
    unless Rescaling/Normalization change them), NHWC or NCHW by ``data_format``."""
    size = (int(image_size[0]), int(image_size[1])) if image_size is not None else None
    st = _State(size, channels)
    steps: List[Step] = list(head)
    layer_list = flatten_layers(layers)
    affine_steps: List[int] = []
    for layer in layer_list:
        try:
            ops_, becomes = _layer_ops(layer, st)
        except NotTranslatable as e:
            steps.append(Step(layer, python=True, reason=e.reason, name=_name(layer)))
            continue
        if st.affine is not None and type(layer).__name__ in ("Rescaling", "Normalization"):
            affine_steps.append(len(steps))
            becomes = f"Normalize ({becomes}; one Normalize for the Rescaling/Normalization layers, last)"
        steps.append(Step(layer, ops_, becomes, name=_name(layer)))
    steps = split_at_first_python("keras", steps, strict)
    native_affine = None
    if affine_steps and not steps[affine_steps[-1]].python:
        # recompute the affine from the native affine layers only
        st2 = _State(None, channels)
        for i in affine_steps:
            if not steps[i].python:
                _layer_ops(steps[i].original, st2)
        native_affine = st2.affine
        last = max(i for i in affine_steps if not steps[i].python)
        s = steps[last]
        steps[last] = Step(s.original, [normalize_op(native_affine)], s.becomes, name=s.name)
    layout = "NCHW" if data_format == "channels_first" else "NHWC"
    # idct="fast": Keras decodes with tf.io.decode_image, whose JPEG default is the fast inverse DCT
    opts = {"dtype": "float32", "layout": layout, "channels": channels, "dct_scaling": False, "idct": "fast"}
    python_layers = [s.original for s in steps if s.python]
    if not python_layers:
        if native_affine is None:
            steps.append(Step(None, [normalize_op(None)], name="(output)",
                              becomes="Normalize(identity): float32 0..255, as Keras (no rescaling)"))
        return Translation("keras", steps, opts)
    prefix = {"dtype": "float32" if native_affine is not None else "uint8", "layout": "NHWC",
              "channels": channels, "dct_scaling": False, "idct": "fast"}
    tail = make_tail(python_layers, data_format == "channels_first", native_affine is not None)
    return Translation("keras", steps, opts, tail=tail, prefix_options=prefix)


def _name(layer: Any) -> str:
    n = type(layer).__name__
    try:
        cfg = layer.get_config()
    except Exception:
        return n
    keep = {k: v for k, v in cfg.items() if k not in ("name", "trainable", "dtype", "data_format", "seed", "batch_input_shape")
            and not isinstance(v, dict)}
    s = f"{n}({', '.join(f'{k}={v!r}' for k, v in keep.items())})"
    return s if len(s) <= 90 else s[:87] + "..."
