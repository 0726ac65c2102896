"""fastq.keras against Keras itself: file lists and splits, element specs, pixels (PSNR),
each layer's mapping, refused values, random layers' draw statistics, the Python
fallback and determinism."""
import os
import shutil
import warnings

import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

import fastq.keras as fk  # noqa: E402
from fastq import ops as fops  # noqa: E402
from fastq.translate import TranslationError  # noqa: E402

L = keras.layers
SIZE = (96, 128)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    from fastq.bench.testdata import make_jpeg_dataset
    root = str(tmp_path_factory.mktemp("kerastree"))
    flat = make_jpeg_dataset(os.path.join(root, "_flat"), 24, seed=3)
    for i, p in enumerate(sorted(flat)):
        c = ("cat", "dog", "bird")[i % 3]
        d = os.path.join(root, c, "sub") if i % 5 == 0 else os.path.join(root, c)
        os.makedirs(d, exist_ok=True)
        shutil.move(p, os.path.join(d, f"img{i:03d}.jpg"))
    shutil.rmtree(os.path.join(root, "_flat"))
    os.makedirs(os.path.join(root, ".hidden"))
    return root


def _all(ds):
    xs, ys = [], []
    for b in ds:
        xs.append(b[0].numpy())
        ys.append(b[1].numpy())
    return np.concatenate(xs), np.concatenate(ys)


def psnr(a, b):
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return 10 * np.log10(255.0 ** 2 / mse) if mse else float("inf")


@pytest.mark.parametrize("seed", [1, 7, 1234])
def test_file_lists_and_splits_equal_keras(tree, seed):
    kw = dict(image_size=SIZE, seed=seed, verbose=False)
    for split in (0.2, 0.5):
        for subset in ("training", "validation"):
            a = keras.utils.image_dataset_from_directory(tree, validation_split=split, subset=subset, **kw)
            b = fk.image_dataset_from_directory(tree, validation_split=split, subset=subset, **kw)
            assert b.file_paths == a.file_paths and b.class_names == a.class_names == ["bird", "cat", "dog"]
        a2 = keras.utils.image_dataset_from_directory(tree, validation_split=split, subset="both", **kw)
        b2 = fk.image_dataset_from_directory(tree, validation_split=split, subset="both", **kw)
        assert [d.file_paths for d in b2] == [d.file_paths for d in a2]
        assert not set(b2[0].file_paths) & set(b2[1].file_paths)


def test_unshuffled_labels_pixels_psnr(tree):
    a = keras.utils.image_dataset_from_directory(tree, image_size=SIZE, shuffle=False, verbose=False)
    b = fk.image_dataset_from_directory(tree, image_size=SIZE, shuffle=False, verbose=False, workers=2)
    assert b.file_paths == a.file_paths
    assert b.element_spec == a.element_spec
    xa, ya = _all(a)
    xb, yb = _all(b)
    assert xb.dtype == np.float32 and xb.shape == xa.shape and xb.max() <= 255 and xb.max() > 200
    np.testing.assert_array_equal(ya, yb)
    # measured 59.1 dB: the decode is TF's (idct="fast"), what is left is the resized image's
    # rounding to uint8 before the float32 output (about 58.9 dB alone)
    assert psnr(xa, xb) >= 55, psnr(xa, xb)


@pytest.mark.parametrize("label_mode,color_mode,fmt", [("categorical", "rgb", "channels_last"),
                                                        ("binary", "grayscale", "channels_last"),
                                                        (None, "rgb", "channels_first"),
                                                        ("int", "grayscale", "channels_first")])
def test_element_spec_and_labels(tree, label_mode, color_mode, fmt):
    names = ["cat", "dog"] if label_mode == "binary" else None
    kw = dict(image_size=SIZE, shuffle=False, verbose=False, label_mode=label_mode, color_mode=color_mode,
              class_names=names, data_format=fmt, batch_size=5)
    a = keras.utils.image_dataset_from_directory(tree, **kw)
    b = fk.image_dataset_from_directory(tree, **kw)
    assert b.element_spec == a.element_spec and b.class_names == a.class_names
    ea, eb = next(iter(a)), next(iter(b))
    if label_mode is not None:
        np.testing.assert_array_equal(ea[1].numpy(), eb[1].numpy())
        ea, eb = ea[0], eb[0]
    assert psnr(ea.numpy(), eb.numpy()) >= 50, psnr(ea.numpy(), eb.numpy())


def test_refused_arguments(tree):
    with pytest.raises(ValueError, match="rgba"):
        fk.image_dataset_from_directory(tree, color_mode="rgba", verbose=False)
    with pytest.raises(ValueError, match="interpolation='bicubic'"):
        fk.image_dataset_from_directory(tree, interpolation="bicubic", verbose=False)
    with pytest.raises(ValueError, match="crop_to_aspect_ratio"):
        fk.image_dataset_from_directory(tree, crop_to_aspect_ratio=True, verbose=False)
    with pytest.raises(ValueError, match="pad_to_aspect_ratio"):
        fk.image_dataset_from_directory(tree, pad_to_aspect_ratio=True, verbose=False)
    with pytest.raises(ValueError, match="seed"):
        fk.image_dataset_from_directory(tree, validation_split=0.2, subset="training", verbose=False)


def test_layer_mapping_parameters():
    tr = fk.translate([L.RandomFlip("horizontal_and_vertical"), L.RandomRotation((-0.05, 0.1), fill_mode="nearest"),
                       L.RandomCrop(80, 100), L.CenterCrop(77, 90), L.Rescaling(2.0, offset=-1.0),
                       L.Normalization(mean=[1.0, 2.0, 3.0], variance=[4.0, 9.0, 16.0])], image_size=SIZE, strict=True)
    assert tr.native
    flip, rot, crop, cc1, cc2, norm = tr.ops
    assert isinstance(flip, fops.RandomApply) and flip.p == 0.5 and len(flip.transforms) == 2
    assert isinstance(rot, fops.KerasRandomRotation)
    assert rot.factor == pytest.approx((-0.05, 0.1)) and rot.fill_mode == "nearest"
    assert crop.size == (80, 100)
    # Keras: top (80-77)//2 = 1, left (100-90)//2 = 5; fastq rounds 1.5 to 2: a 78x90 crop, then 77x90
    assert (cc1.size, cc2.size) == ((78, 90), (77, 90))
    # (2x - 1 - m) / s as one Normalize: out = (x - mean) / std on 0..255 values
    x = np.array([0.0, 100.0, 255.0])
    for c, (m, v) in enumerate(zip((1, 2, 3), (4, 9, 16))):
        want = (2 * x - 1 - m) / np.sqrt(v)
        got = (x - norm.mean[c] * norm.max_pixel_value) / (norm.std[c] * norm.max_pixel_value)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    tr2 = fk.translate([L.Resizing(50, 60), L.RandomGrayscale(0.3), L.RandomFlip("vertical")], strict=True)
    assert tr2.ops[0].size == (50, 60) and tr2.ops[1].p == pytest.approx(0.3)
    assert isinstance(tr2.ops[2], fops.VerticalFlip)
    tr3 = fk.translate([L.RandomZoom(0.2, (-0.1, 0.3), fill_mode="wrap", interpolation="nearest"),
                        L.RandomZoom((0.1, -0.2)), L.RandomTranslation((-0.1, 0.2), 0.3, fill_mode="constant",
                                                                       fill_value=7.0),
                        L.RandomContrast(0.3), L.RandomContrast((0.1, 0.6)), L.RandomBrightness(0.2, value_range=(0, 1))],
                       strict=True)
    z1, z2, t, c1, c2, b = tr3.ops[:6]
    assert (z1.height_factor, z1.width_factor, z1.fill_mode, z1.interpolation) == ((-0.2, 0.2), (-0.1, 0.3), "wrap",
                                                                                  "nearest")
    assert z2.height_factor == (-0.2, 0.1) and z2.width_factor is None  # width_factor=None: one draw for both
    assert (t.height_factor, t.width_factor, t.fill_mode, t.fill_value) == ((-0.1, 0.2), (-0.3, 0.3), "constant", 7.0)
    # Keras: RandomContrast(0.3) has factor (0, 0.3) (bounds [0, 1]): contrast ~ U(1, 1.3); (0.1, 0.6): U(0.9, 1.6)
    assert c1.fields()["factor"] == pytest.approx((1.0, 1.3)) and c2.fields()["factor"] == pytest.approx((0.9, 1.6))
    assert b.factor == pytest.approx((-0.2, 0.2)) and b.value_range == (0.0, 1.0)


@pytest.mark.parametrize("layer,what", [
    (L.RandomZoom(0.1, fill_mode="constant", fill_value=0.5), "fill_value"),
    (L.RandomRotation(0.1, fill_mode="constant", fill_value=300.0), "fill_value"),
    (L.Resizing(10, 10, interpolation="bicubic"), "interpolation='bicubic'"),
    (L.RandomContrast(0.2, value_range=(0, 0.5)), "value_range"),
    (L.RandomBrightness(0.2, value_range=(-1, 1)), "value_range"),
    (L.RandomColorJitter(brightness_factor=0.2), "saturation"),
    (L.Lambda(lambda t: t), "Lambda"),
])
def test_refused_layers(layer, what):
    with pytest.raises(TranslationError, match=type(layer).__name__):
        fk.translate([L.RandomFlip(), layer], strict=True, image_size=SIZE)
    with pytest.warns(UserWarning, match=type(layer).__name__) as rec:
        tr = fk.translate([L.RandomFlip(), layer, L.RandomFlip()], image_size=SIZE)
    assert len([r for r in rec if "does not translate" in str(r.message)]) == 1
    assert len(tr.python_steps) == 2 and what in tr.steps[1].reason
    with pytest.warns(UserWarning):  # a native layer after Rescaling cannot follow fastq's last Normalize
        tr3 = fk.translate([L.Rescaling(0.5), L.RandomFlip()])
    assert "after Rescaling" in tr3.steps[1].reason


def _keras_affine(img, out_to_in, interpolation="bilinear", fill_mode="reflect"):
    t = np.concatenate([np.asarray(out_to_in, np.float32).reshape(-1), [0, 0]])[None].astype(np.float32)
    out = keras.ops.image.affine_transform(img[None], t, interpolation=interpolation, fill_mode=fill_mode)
    return keras.ops.convert_to_numpy(out)[0]


KERAS_GEOM = [L.RandomRotation(0.1), L.RandomZoom(0.2, 0.3, fill_mode="nearest"), L.RandomTranslation(0.1, 0.2),
              L.RandomRotation((-0.2, 0.3), fill_mode="wrap", interpolation="nearest"),
              L.RandomZoom((-0.4, 0.5), fill_mode="constant", fill_value=40.0),
              L.RandomTranslation((-0.3, 0.1), 0.25, fill_mode="constant", interpolation="nearest")]


@pytest.mark.parametrize("layer", KERAS_GEOM, ids=lambda l: f"{type(l).__name__}-{l.fill_mode}-{l.interpolation}")
def test_geometry_pixels_against_keras(tree, layer):
    """Replay each sample's drawn parameters (explain record) through Keras's own layer
    (transform_images with the drawn transformation) on Keras's decoded+resized image:
    >= 47 dB (measured: worst of 12 samples 49.5-59 dB over runs, the draws being unseeded;
    medians 55-60 dB: the uint8 rounding after the resize and after the warp; on the same uint8 image the ops are within 1/32 pixel of TF's sampling
    (sampling="opencv", fastq.keras's choice) or byte-equal to it ("tf", and wrap / nearest),
    tests/ops/test_keras_ops.py)."""
    ka = keras.utils.image_dataset_from_directory(tree, image_size=SIZE, shuffle=False, verbose=False, batch_size=None)
    kimgs = [x.numpy() for x, _ in ka]
    ds = fk.image_dataset_from_directory(tree, image_size=SIZE, shuffle=False, verbose=False, augment=[layer])
    x, _ = _all(ds)
    pipe = ds.fastq_pipeline
    vals = []
    for i in range(12):
        rec = pipe.explain(0, i)["ops"][1]
        assert rec["op"] == "Keras" + type(layer).__name__
        ref = keras.ops.convert_to_numpy(layer.transform_images(kimgs[i][None], _keras_transformation(layer, rec),
                                                                training=True))[0]
        vals.append(psnr(ref, x[i]))
    print(type(layer).__name__, layer.fill_mode, layer.interpolation, "PSNR min/median dB", round(min(vals), 1),
          round(float(np.median(vals)), 1))
    assert min(vals) >= 47, (type(layer).__name__, vals)


def _keras_transformation(layer, rec):
    """The transformation dict Keras's layer would have drawn, from a fastq explain record."""
    f32 = lambda v: np.asarray(v, np.float32).reshape(1, 1)  # noqa: E731
    n = type(layer).__name__
    if n == "RandomZoom":
        return {"height_zoom": f32(rec["zoom"][0]), "width_zoom": f32(rec["zoom"][1])}
    if n == "RandomTranslation":
        return {"translations": np.array([[rec["translation"][1], rec["translation"][0]]], np.float32)}
    if n == "RandomRotation":
        h, w = rec["in_shape"]
        m = layer._compute_affine_matrix(center_x=0.5, center_y=0.5, angle=np.array([rec["angle"]], np.float32),
                                         translate_x=np.zeros(1, np.float32), translate_y=np.zeros(1, np.float32),
                                         scale=np.ones(1, np.float32), shear_x=np.zeros(1, np.float32),
                                         shear_y=np.zeros(1, np.float32), height=h, width=w)
        return {"rotation_matrix": m}
    if n == "RandomContrast":
        return {"contrast_factor": np.full((1, 1, 1, 1), rec["factor"], np.float32)}
    return {"rgb_delta": np.full((1, 1, 1, 1), rec["factor"] * (layer.value_range[1] - layer.value_range[0]),
                                 np.float32)}


@pytest.mark.parametrize("layer", [L.RandomContrast(0.5), L.RandomContrast((0.2, 0.9), value_range=(10, 200)),
                                   L.RandomBrightness(0.3), L.RandomBrightness((-0.5, 0.1), value_range=(5, 250))],
                         ids=lambda l: f"{type(l).__name__}-{l.factor}-{l.value_range}")
def test_color_pixels_against_keras(tree, layer):
    """RandomContrast / RandomBrightness: the drawn factor replayed through Keras's layer on
    Keras's image: >= 47 dB (measured: worst of 12 samples 51-55 dB, medians 55-59 dB)."""
    ka = keras.utils.image_dataset_from_directory(tree, image_size=SIZE, shuffle=False, verbose=False, batch_size=None)
    kimgs = [x.numpy() for x, _ in ka]
    ds = fk.image_dataset_from_directory(tree, image_size=SIZE, shuffle=False, verbose=False, augment=[layer])
    x, _ = _all(ds)
    vals = []
    for i in range(12):
        rec = ds.fastq_pipeline.explain(0, i)["ops"][1]
        ref = keras.ops.convert_to_numpy(layer.transform_images(kimgs[i][None], _keras_transformation(layer, rec),
                                                                training=True))[0]
        vals.append(psnr(ref, x[i]))
    print(type(layer).__name__, layer.factor, "PSNR min/median dB", round(min(vals), 1), round(float(np.median(vals)), 1))
    assert min(vals) >= 47, vals


def test_random_layer_statistics(tree):
    aug = [L.RandomFlip("horizontal"), L.RandomRotation(0.1), L.RandomZoom(0.1, (-0.2, 0.3)),
           L.RandomGrayscale(0.25), L.RandomTranslation((-0.1, 0.2), 0.05), L.RandomContrast((0.1, 0.4)),
           L.RandomBrightness(0.2)]
    ds = fk.image_dataset_from_directory(tree, image_size=SIZE, shuffle=True, seed=5, verbose=False, augment=aug)
    pipe = ds.fastq_pipeline
    keys = ("flip", "angle", "zh", "zw", "gray", "dy", "dx", "contrast", "brightness")
    v = {k: [] for k in keys}
    for epoch in range(50):
        for i in range(24):
            r = pipe.explain(epoch, i)["ops"]
            v["flip"].append(r[1]["applied"])
            v["angle"].append(r[2]["angle"])
            v["zh"].append(r[3]["zoom"][0])
            v["zw"].append(r[3]["zoom"][1])
            v["gray"].append(r[4]["applied"])
            v["dy"].append(r[5]["translation"][0])
            v["dx"].append(r[5]["translation"][1])
            v["contrast"].append(r[6]["factor"])
            v["brightness"].append(r[7]["factor"])
    v = {k: np.asarray(a, np.float64) for k, a in v.items()}
    n = len(v["angle"])
    h, w = SIZE
    assert abs(np.mean(v["flip"]) - 0.5) < 4 * 0.5 / np.sqrt(n)
    assert abs(np.mean(v["gray"]) - 0.25) < 4 * np.sqrt(0.25 * 0.75 / n)
    # Keras: angle ~ U(-0.1, 0.1) * 360; zoom_h ~ 1 + U(-0.1, 0.1), zoom_w ~ 1 + U(-0.2, 0.3) (its own draw);
    # dy ~ U(-0.1, 0.2) * H, dx ~ U(-0.05, 0.05) * W; contrast ~ U(1 - 0.1, 1 + 0.4); brightness factor ~ U(-0.2, 0.2)
    ranges = {"angle": (-36, 36), "zh": (0.9, 1.1), "zw": (0.8, 1.3), "dy": (-0.1 * h, 0.2 * h),
              "dx": (-0.05 * w, 0.05 * w), "contrast": (0.9, 1.4), "brightness": (-0.2, 0.2)}
    assert abs(np.corrcoef(v["zh"], v["zw"])[0, 1]) < 0.1
    for k, (lo, hi) in ranges.items():
        a = v[k]
        assert a.min() >= lo and a.max() <= hi, k
        assert abs(a.mean() - (lo + hi) / 2) < 4 * (hi - lo) / np.sqrt(12 * n), k
        assert abs(a.std() - (hi - lo) / np.sqrt(12)) < 0.05 * (hi - lo), k
        assert a.min() < lo + 0.02 * (hi - lo) and a.max() > hi - 0.02 * (hi - lo), k


def test_fallback_equals_layer_on_prefix_output(tree):
    lam = L.Lambda(lambda t: t * 0.5 + 3.0)
    with pytest.warns(UserWarning, match="Lambda"):
        ds = fk.image_dataset_from_directory(tree, image_size=SIZE, shuffle=False, verbose=False, seed=3,
                                             augment=[L.RandomFlip("vertical"), lam])
    x, _ = _all(ds)
    ref = fk.image_dataset_from_directory(tree, image_size=SIZE, shuffle=False, verbose=False, seed=3,
                                          augment=[L.RandomFlip("vertical")])
    xr, _ = _all(ref)
    np.testing.assert_allclose(x, xr * 0.5 + 3.0, rtol=0, atol=1e-4)
    assert ds.fastq_pipeline.stats()["translation"]["python_steps"]


def test_workers_bit_identical(tree):
    aug = keras.Sequential([L.RandomFlip(), L.RandomRotation(0.1), L.RandomZoom(0.1), L.RandomTranslation(0.1, 0.1),
                            L.RandomContrast(0.3), L.RandomBrightness(0.2), L.Rescaling(1 / 255.0)])
    outs = []
    for w in (1, 2):
        ds = fk.image_dataset_from_directory(tree, image_size=SIZE, seed=9, verbose=False, augment=aug, workers=w)
        outs.append(_all(ds))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    assert ds.fastq_translation.native and not any(isinstance(o, fops.PyFunc) for o in ds.fastq_translation.ops)
    assert 0 <= outs[0][0].min() and outs[0][0].max() <= 1.0
