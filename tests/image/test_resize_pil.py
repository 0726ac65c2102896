"""The pil_* interpolations (csrc/image/geometry/fq_image_resize_pil.cpp) against the installed
Pillow's Image.resize, byte for byte: random images of many sizes (down, up, mixed, odd, 1-pixel
sides, extreme ratios), 1 and 3 channels, every mode; photos; through the resize ops in a
Pipeline (Resize, Resize(shorter_side) with torchvision's size rule, RandomResizedCrop against
torchvision's resized_crop on the PIL image with the box from explain); JPEG op 0 never
DCT-scaled; 1 vs 2 workers identical; warps refuse the names."""
import numpy as np
import pytest

import fastq
from fastq._native import _image
from fastq import ops as O

Image = pytest.importorskip("PIL.Image")

MODES = {"pil_nearest": Image.NEAREST, "pil_bilinear": Image.BILINEAR, "pil_bicubic": Image.BICUBIC,
         "pil_lanczos": Image.LANCZOS, "pil_box": Image.BOX, "pil_hamming": Image.HAMMING}


def _fq(arr, h, w, interp):
    c = 1 if arr.ndim == 2 else 3
    spec = _image.ImageSpec(O.compile_ops([O.Resize((h, w), interpolation=interp)], dtype="uint8", channels=c,
                                          input_size=arr.shape[:2]))
    out = spec.process_array(arr if c == 3 else arr[..., None], 1, 0, 0)[0]
    return out if c == 3 else out[..., 0]


def _pil(arr, h, w, interp):
    return np.asarray(Image.fromarray(arr).resize((w, h), MODES[interp]))


def _same(arr, h, w, interp):
    a, b = _fq(arr, h, w, interp), _pil(arr, h, w, interp)
    assert a.shape == b.shape
    if not np.array_equal(a, b):
        d = np.abs(a.astype(int) - b)
        pytest.fail(f"{interp} {arr.shape} -> {(h, w)}: {int((d > 0).sum())} bytes differ, max {int(d.max())}")


def test_names_are_listed():
    assert {n for n in O.INTERPOLATIONS if n.startswith("pil_")} == set(MODES)


@pytest.mark.parametrize("interp", list(MODES))
@pytest.mark.parametrize("channels", [1, 3])
def test_random_sizes_equal_pillow(interp, channels):
    rs = np.random.RandomState(hash((interp, channels)) % 2 ** 31)
    for _ in range(60):
        sh, sw, oh, ow = rs.randint(1, 260, 4)
        shape = (sh, sw, 3) if channels == 3 else (sh, sw)
        _same(rs.randint(0, 256, shape, dtype=np.uint8), oh, ow, interp)


@pytest.mark.parametrize("interp", list(MODES))
def test_edge_sizes_equal_pillow(interp):
    rs = np.random.RandomState(7)
    cases = [((1000, 7), (3, 5)), ((3, 9), (1000, 11)), ((7, 1000), (5, 3)), ((9, 3), (11, 1000)),
             ((1, 1), (17, 13)), ((17, 13), (1, 1)), ((1, 300), (5, 7)), ((300, 1), (7, 5)),
             ((500, 375), (224, 224)), ((375, 500), (224, 224)), ((231, 310), (224, 224)),
             ((300, 230), (224, 224)), ((224, 300), (224, 224)), ((300, 224), (224, 224)),
             ((255, 255), (256, 256)), ((101, 99), (99, 101))]
    for (sh, sw), (oh, ow) in cases:
        for shape in ((sh, sw, 3), (sh, sw)):
            _same(rs.randint(0, 256, shape, dtype=np.uint8), oh, ow, interp)
    # saturating content (the clip to [0, 255] of overshooting kernels)
    sat = (rs.randint(0, 2, (61, 47, 3)) * 255).astype(np.uint8)
    for oh, ow in ((20, 160), (160, 20), (13, 13), (200, 190)):
        _same(sat, oh, ow, interp)


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    from fastq.bench.testdata import make_jpeg_dataset
    paths = make_jpeg_dataset(str(tmp_path_factory.mktemp("pilphotos")), 3, seed=3, min_side=300, max_side=640)
    return [np.asarray(Image.open(p).convert("RGB")) for p in paths], paths


@pytest.mark.parametrize("interp", list(MODES))
def test_photos_equal_pillow(photos, interp):
    for img in photos[0]:
        h, w = img.shape[:2]
        for oh, ow in ((224, 224), (h // 3, w // 2), (h * 3 // 2, w + 5)):
            _same(img, oh, ow, interp)
        _same(np.ascontiguousarray(img[..., 1]), 100, 77, interp)


def _batch(src, op_list, workers=1, **kw):
    with fastq.Pipeline(src, batch_size=1, ops=op_list, dtype="uint8", workers=workers, drop_remainder=False,
                        **kw) as p:
        out = [b[0][0].copy() for b in p]
        return out, p


def test_pipeline_resize_ops_match_torchvision_on_pil(photos):
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    from torchvision.transforms import InterpolationMode as IM
    imgs = photos[0]
    for interp, mode in (("pil_bilinear", IM.BILINEAR), ("pil_bicubic", IM.BICUBIC), ("pil_lanczos", IM.LANCZOS),
                         ("pil_nearest", IM.NEAREST), ("pil_box", IM.BOX), ("pil_hamming", IM.HAMMING)):
        src = fastq.sources.Arrays(imgs)
        # shorter side (torchvision's size rule) + centre crop: the usual evaluation chain
        got, _ = _batch(src, [O.Resize(256, interpolation=interp), O.CenterCrop(224)])
        for g, img in zip(got, imgs):
            ref = np.asarray(F.center_crop(F.resize(Image.fromarray(img), 256, interpolation=mode), [224, 224]))
            np.testing.assert_array_equal(g, ref, err_msg=interp)
        got, _ = _batch(src, [O.Resize((200, 300), interpolation=interp)])
        for g, img in zip(got, imgs):
            ref = np.asarray(F.resize(Image.fromarray(img), [200, 300], interpolation=mode))
            np.testing.assert_array_equal(g, ref, err_msg=interp)


@pytest.mark.parametrize("interp,mode", [("pil_bilinear", "BILINEAR"), ("pil_bicubic", "BICUBIC")])
def test_random_resized_crop_matches_torchvision_resized_crop(photos, interp, mode):
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    from torchvision.transforms import InterpolationMode as IM
    imgs = photos[0] * 4
    src = fastq.sources.Arrays(imgs)
    rrc = O.RandomResizedCrop(224, interpolation=interp)
    got, p = _batch(src, [rrc], seed=11)
    for i, (g, img) in enumerate(zip(got, imgs)):
        x, y, w, h = p.explain(0, i)["ops"][0]["box"]
        ref = np.asarray(F.resized_crop(Image.fromarray(img), y, x, h, w, [224, 224],
                                        interpolation=getattr(IM, mode)))
        np.testing.assert_array_equal(g, ref, err_msg=f"{interp} sample {i} box {(x, y, w, h)}")


def test_jpeg_first_op_is_never_dct_scaled(photos):
    """Resize / RandomResizedCrop with a pil_* name as op 0 of a JPEG chain: decoded at full
    scale (dct_scaling on or not), then Pillow's resize of the decoded pixels"""
    data = [open(p, "rb").read() for p in photos[1]]
    full = []
    for d, path in zip(data, photos[1]):  # fastq's own full-scale decode (a whole-image crop)
        w, h = Image.open(path).size
        full += _batch(fastq.sources.Bytes([d]), [O.CenterCrop((h, w))])[0]
    for op in (O.Resize((64, 48), interpolation="pil_bilinear"), O.RandomResizedCrop(56, interpolation="pil_bicubic")):
        got, p = _batch(fastq.sources.Bytes(data), [op], dct_scaling=True, seed=4)
        for i, (g, dec) in enumerate(zip(got, full)):
            ex = p.explain(0, i)
            assert ex["decode_scale"] == (8, 8), ex
            if isinstance(op, O.Resize):
                ref = _pil(dec, 64, 48, "pil_bilinear")
            else:
                x, y, w, h = ex["ops"][0]["box"]
                ref = _pil(np.ascontiguousarray(dec[y:y + h, x:x + w]), 56, 56, "pil_bicubic")
            np.testing.assert_array_equal(g, ref)


def test_other_resize_ops_take_the_names(photos):
    imgs = photos[0]
    for op in (O.ResizeShortestEdge(200, max_size=300, interpolation="pil_lanczos"),
               O.ScaleJitter(160, (0.5, 1.5), interpolation="pil_bilinear"),
               O.TensorpackCrop(96, interpolation="pil_bicubic")):
        chain = [op] + ([O.Pad(size=(300, 300))] if isinstance(op, O.ResizeShortestEdge) else [])
        got, _ = _batch(fastq.sources.Arrays(imgs), chain, seed=2)
        assert len(got) == len(imgs)
    # ResizeShortestEdge is a plain resize to its computed size: compare with Pillow
    got, p = _batch(fastq.sources.Arrays(imgs), [O.ResizeShortestEdge(200, max_size=300, interpolation="pil_lanczos"),
                                                 O.Pad(size=(300, 300))])
    for i, (g, img) in enumerate(zip(got, imgs)):
        oh, ow = p.explain(0, i)["ops"][0]["out_shape"]
        np.testing.assert_array_equal(g[:oh, :ow], _pil(img, oh, ow, "pil_lanczos"))


def test_one_and_two_workers_give_the_same_bytes(photos):
    imgs = photos[0] * 3
    chain = [O.RandomResizedCrop(96, interpolation="pil_lanczos"), O.HorizontalFlip()]
    a, _ = _batch(fastq.sources.Arrays(imgs), chain, workers=1, seed=9)
    b, _ = _batch(fastq.sources.Arrays(imgs), chain, workers=2, seed=9)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("interp", list(MODES))
def test_warps_refuse_the_names(interp):
    with pytest.raises(ValueError, match="only available to resize ops"):
        O.RandomAffine(10, interpolation=interp)


def test_torchvision_uint8_tensor_antialias_report(photos):
    """torchvision's resize of a uint8 tensor with antialias=True (bilinear / bicubic) follows
    Pillow's scheme; this records how close it is to pil_* (docs/ops.md states the result)."""
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    from torchvision.transforms import InterpolationMode as IM
    img = photos[0][0]
    t = torch.from_numpy(img.copy()).permute(2, 0, 1).contiguous()
    for interp, mode in (("pil_bilinear", IM.BILINEAR), ("pil_bicubic", IM.BICUBIC)):
        for oh, ow in ((224, 224), (img.shape[0] // 3, img.shape[1] // 2)):
            ref = F.resize(t, [oh, ow], interpolation=mode, antialias=True).permute(1, 2, 0).numpy()
            d = np.abs(ref.astype(int) - _fq(img, oh, ow, interp))
            assert d.max() <= 1, (interp, oh, ow, int(d.max()))
