"""Keras 3 preprocessing layers -> fastq ops (docs/migrate.md, "Keras").

Each layer is mapped argument by argument onto ops whose semantics are Keras's own
(keras/src/layers/preprocessing/image_preprocessing/*.py): the same transform, the same
draw distribution per sample, the same pixel-centre convention.  A layer or an argument
value without an exact equivalent raises :class:`NotTranslatable` here; the shared core
then runs it, and every layer after it, in Python on the native prefix's output.

Geometry: Keras's affine layers hand an output->input matrix to
``ImageProjectiveTransformV3`` (pixel centres at integer coordinates).  RandomRotation
draws an angle uniformly, as fastq's RandomAffine does, so it maps onto RandomAffine.
RandomZoom draws the zoom ``z`` (the input-coordinate scale) uniformly, whose inverse
RandomAffine's ``scale`` would have to be, and RandomTranslation draws sub-pixel shifts
where RandomAffine rounds to whole pixels: both run as a :class:`fastq.ops.PyFunc` on the
worker threads that draws Keras's parameters from the sample's generator and warps with
``cv2.warpAffine(WARP_INVERSE_MAP)`` on Keras's matrix.  Fill modes: Keras ``reflect``
(``dcba|abcd|dcba``) = cv ``BORDER_REFLECT`` (fastq "symmetric"), ``nearest`` = replicate,
``constant`` = constant with ``fill_value``; ``wrap`` is refused (TF's wrap clamps the
coordinate on the seam column, OpenCV interpolates across it).
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from fastq import ops as fops
from fastq.translate._core import NotTranslatable, Step, Translation, split_at_first_python

__all__ = ["translate", "KerasWarp", "flatten_layers"]

_FILL = {"reflect": ("symmetric", "BORDER_REFLECT"), "nearest": ("replicate", "BORDER_REPLICATE"),
         "constant": ("constant", "BORDER_CONSTANT")}


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


def _fill(layer: Any) -> Tuple[str, str, int]:
    mode = getattr(layer, "fill_mode", "reflect")
    if mode not in _FILL:
        raise NotTranslatable(f"fill_mode={mode!r} (fastq does {sorted(_FILL)} exactly)")
    fv = float(getattr(layer, "fill_value", 0.0) or 0.0)
    if mode == "constant" and not (fv.is_integer() and 0 <= fv <= 255):
        raise NotTranslatable(f"fill_value={fv!r} (fastq's fill is an integer 0..255 on uint8 pixels)")
    return _FILL[mode][0], _FILL[mode][1], int(fv)


def _interp(layer: Any) -> str:
    it = getattr(layer, "interpolation", "bilinear")
    if it not in ("bilinear", "nearest"):
        raise NotTranslatable(f"interpolation={it!r} (fastq warps with bilinear or nearest)")
    return it


def _flip_both(image: np.ndarray, rng: np.random.Generator) -> Optional[np.ndarray]:
    """RandomFlip("horizontal_and_vertical"): Keras flips both axes when u <= 0.5."""
    if rng.uniform() <= 0.5:
        return np.ascontiguousarray(image[::-1, ::-1])
    return None


class KerasWarp:
    """The per-sample warp of RandomZoom / RandomTranslation (a PyFunc callable): draws
    Keras's parameters in Keras's order from the sample's generator and applies Keras's
    output->input matrix with cv2.warpAffine.  ``params(rng, h, w)`` gives the draws
    (used by the tests to replay a sample's explain record)."""

    def __init__(self, kind: str, height: Tuple[float, float], width: Optional[Tuple[float, float]],
                 border: str, fill: int, interpolation: str) -> None:
        import cv2
        self.kind = kind
        self.height = height
        self.width = width
        self.border_name = border
        self._border = getattr(cv2, border)
        self.fill = fill
        self.interpolation = interpolation
        self._flags = (cv2.INTER_LINEAR if interpolation == "bilinear" else cv2.INTER_NEAREST) | cv2.WARP_INVERSE_MAP

    @staticmethod
    def generator(rng_key: int) -> np.random.Generator:
        """The generator the PyFunc got for an explain record's ``rng_key``: numpy's
        default_rng of the first u64 of the op's SplitMix64 stream (docs/custom_ops.md)."""
        m = (1 << 64) - 1
        z = (int(rng_key) + 0x9E3779B97F4A7C15) & m
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        return np.random.default_rng(z ^ (z >> 31))

    def params(self, rng: np.random.Generator, h: int, w: int) -> Dict[str, float]:
        if self.kind == "zoom":
            zh = float(rng.uniform(1.0 + self.height[0], 1.0 + self.height[1]))
            zw = float(rng.uniform(1.0 + self.width[0], 1.0 + self.width[1])) if self.width is not None else zh
            return {"zoom_h": zh, "zoom_w": zw}
        dy = float(rng.uniform(self.height[0], self.height[1])) * h
        dx = float(rng.uniform(self.width[0], self.width[1])) * w
        return {"dy": dy, "dx": dx}

    def matrix(self, p: Dict[str, float], h: int, w: int) -> np.ndarray:
        """Keras's output->input 2x3 matrix (float32, as Keras builds it)."""
        if self.kind == "zoom":
            zw, zh = np.float32(p["zoom_w"]), np.float32(p["zoom_h"])
            return np.array([[zw, 0, (np.float32(w) - 1) / 2 * (1 - zw)],
                             [0, zh, (np.float32(h) - 1) / 2 * (1 - zh)]], dtype=np.float32)
        return np.array([[1, 0, -p["dx"]], [0, 1, -p["dy"]]], dtype=np.float32)

    def __call__(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        import cv2
        h, w = image.shape[:2]
        m = self.matrix(self.params(rng, h, w), h, w)
        out = cv2.warpAffine(image, m.astype(np.float64), (w, h), flags=self._flags, borderMode=self._border,
                             borderValue=(self.fill,) * 4)
        return out.reshape(image.shape)

    def __repr__(self) -> str:
        what = (f"zoom height={self.height}, width={self.width if self.width is not None else 'same draw'}"
                if self.kind == "zoom" else f"translate height={self.height}, width={self.width}")
        return (f"KerasWarp({what}, border={self.border_name}, fill={self.fill}, "
                f"interpolation={self.interpolation!r})")


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
        if mode == "horizontal_and_vertical":  # one draw flips both (Keras uses one mask)
            # a PyFunc, not RandomApply([HorizontalFlip(1), VerticalFlip(1)]): fastq's ImageSpec refuses a chain
            # with both a composition and a PyFunc ("the op objects do not match the packed ops")
            return [fops.PyFunc(_flip_both)], "PyFunc: both flips together if u <= 0.5 (one draw, as Keras)"
        raise NotTranslatable(f"mode={mode!r}")
    if name == "RandomRotation":
        border, _, fill = _fill(layer)
        lo, hi = layer.factor
        return [fops.RandomAffine(degrees=(lo * 360.0, hi * 360.0), border=border, fill=fill,
                                  interpolation=_interp(layer))], ""
    if name in ("RandomZoom", "RandomTranslation"):
        _, cvb, fill = _fill(layer)
        it = _interp(layer)
        hl = (float(layer.height_lower), float(layer.height_upper))
        if name == "RandomZoom":
            wl = (float(layer.width_lower), float(layer.width_upper)) if layer.width_factor is not None else None
            warp = KerasWarp("zoom", hl, wl, cvb, fill, it)
        else:
            warp = KerasWarp("translate", hl, (float(layer.width_lower), float(layer.width_upper)), cvb, fill, it)
        return [fops.PyFunc(warp)], f"PyFunc({warp!r})"
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
    if name in ("RandomContrast", "RandomBrightness", "RandomColorJitter", "RandAugment"):
        reasons = {
            "RandomContrast": "Keras blends towards each channel's own mean in float; fastq's Contrast uses the grey mean",
            "RandomBrightness": "Keras adds a delta; fastq's brightness ops multiply",
            "RandomColorJitter": "its brightness and contrast are RandomBrightness/RandomContrast (not exact)",
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
    st = _State(tuple(image_size) if image_size is not None else None, channels)
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
    opts = {"dtype": "float32", "layout": layout, "channels": channels, "dct_scaling": False}
    python_layers = [s.original for s in steps if s.python]
    if not python_layers:
        if native_affine is None:
            steps.append(Step(None, [normalize_op(None)], name="(output)",
                              becomes="Normalize(identity): float32 0..255, as Keras (no rescaling)"))
        return Translation("keras", steps, opts)
    prefix = {"dtype": "float32" if native_affine is not None else "uint8", "layout": "NHWC",
              "channels": channels, "dct_scaling": False}
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
