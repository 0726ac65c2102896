"""Per-instance masks (fastq.targets: instance_polygons / instance_rles / instance_masks,
csrc/image/targets/fq_image_targets_inst.cpp, csrc/task/fq_imgtask_instance_masks.c).  Independent
references: polygons moved with numpy float64 maps built here from the explain record
(torchvision's _get_inverse_affine_matrix for the Rotate / Shear / Translate primitives),
then rasterized by pycocotools (frPyObjects + decode) and kept where the output shows the
source (the image's fill, as transform_mask of an all-ones mask gives it, is no object);
bitmaps / RLE against nearest resizes at pixel centres (tests/helpers/mask_ref.py, TF's
arithmetic; cv2's INTER_NEAREST with sampling="legacy") and flips of the decoded mask, and
against the existing transform_mask path."""
import json
import math

import numpy as np
import pytest

import fastq.ops as O
from fastq._native import _image
from fastq import errors
from fastq import targets as T
from fastq.annotations.rle import rle_decode, rle_encode
from helpers.mask_ref import nearest_centre

mask_api = pytest.importorskip("pycocotools.mask", reason="pycocotools is in requirements-dev.txt")
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword")

H, W = 96, 128


def run(ops, img=None, index=0, seed=7):
    if img is None:
        img = (np.arange(H * W * 3) % 251).astype(np.uint8).reshape(H, W, 3)
    spec = _image.ImageSpec(O.compile_ops(ops, dtype="uint8", channels=3, input_size=img.shape[:2]))
    return spec.process_array(img, seed, 0, index)


CHAINS = {
    "rrc": [O.RandomResizedCrop((64, 80), scale=(0.2, 1.0))],
    "resize_up": [O.Resize((150, 190))],
    "center_crop_pad": [O.CenterCrop((120, 150))],
    "random_crop_pad": [O.RandomCrop((90, 110), padding=(5, 7, 3, 9))],
    "flips": [O.HorizontalFlip(0.5), O.VerticalFlip(0.5)],
    "affine": [O.RandomAffine(25, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=8)],
    "rotate": [O.Rotate((-40, 40))],
    "shear_translate": [O.ShearX((-0.3, 0.3)), O.ShearY((-0.3, 0.3)), O.TranslateX((-20, 20)),
                        O.TranslateY((-20, 20))],
    "rse_pad": [O.ResizeShortestEdge([64, 80], max_size=120), O.Pad(size=(128, 128))],
    "scale_jitter": [O.ScaleJitter((80, 80), scale=(0.3, 2.0))],
    "zoom_out": [O.RandomZoomOut(side_range=(1.0, 2.5), p=0.7), O.Resize((80, 80))],
    "chain": [O.HorizontalFlip(0.5), O.RandomResizedCrop((72, 72)), O.VerticalFlip(0.5), O.Rotate((-20, 20)),
              O.ColorJitter(0.4, 0.4)],
}


def np_maps(ex):
    """Forward 2x3 maps (continuous pixels) of the records, written from the record fields."""
    from torchvision.transforms.functional import _get_inverse_affine_matrix as inv_affine

    maps = []
    for r in ex["ops"]:
        op, (ih, iw), (oh, ow) = r["op"], r["in_shape"], r["out_shape"]
        applied = r.get("applied", True)
        M = None
        if op == "RandomResizedCrop":
            x, y, w, h = r["box"]
            M = [[ow / w, 0, -x * ow / w], [0, oh / h, -y * oh / h]]
        elif op in ("Resize", "ResizeShortestEdge"):
            M = [[ow / iw, 0, 0], [0, oh / ih, 0]]
        elif op == "ScaleJitter":
            x, y, w, h = r["box"]
            M = [[w / iw, 0, -x], [0, h / ih, -y]]
        elif op == "CenterCrop":
            M = [[1, 0, -r["box"][0]], [0, 1, -r["box"][1]]]
        elif op == "RandomCrop":
            M = [[1, 0, -(r["box"][0] - r["pad"][0])], [0, 1, -(r["box"][1] - r["pad"][1])]]
        elif op == "RandomZoomOut" and applied:
            M = [[1, 0, r["pad"][0]], [0, 1, r["pad"][1]]]
        elif op == "HorizontalFlip" and applied:
            M = [[-1, 0, iw], [0, 1, 0]]
        elif op == "VerticalFlip" and applied:
            M = [[1, 0, 0], [0, -1, ih]]
        elif op == "RandomAffine":  # the record maps pixel indices (centres at integers)
            A = np.array(r["matrix"], np.float64)
            M = np.concatenate([A[:, :2], (A[:, 2] + 0.5 - 0.5 * A[:, :2].sum(1))[:, None]], 1)
        elif op in ("Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY") and applied:
            v = r["magnitude"]
            if op == "Rotate":
                m = inv_affine([0.0, 0.0], -v, [0.0, 0.0], 1.0, [0.0, 0.0])
            elif op in ("ShearX", "ShearY"):
                s = math.degrees(math.atan(v))
                m = inv_affine([-iw * 0.5, -ih * 0.5], 0.0, [0.0, 0.0], 1.0, [s, 0.0] if op == "ShearX" else [0.0, s])
            else:
                t = float(int(v))
                m = inv_affine([0.0, 0.0], 0.0, [t, 0.0] if op == "TranslateX" else [0.0, t], 1.0, [0.0, 0.0])
            inv = np.vstack([np.array(m, np.float64).reshape(2, 3), [0, 0, 1]])
            fwd = np.linalg.inv(inv)  # centred coordinates u = x - W/2
            c = np.array([[1, 0, iw / 2], [0, 1, ih / 2], [0, 0, 1]], np.float64)
            cm = np.array([[1, 0, -iw / 2], [0, 1, -ih / 2], [0, 0, 1]], np.float64)
            M = (c @ fwd @ cm)[:2]
        if M is not None:
            maps.append(np.asarray(M, np.float64))
    return maps


def np_move(ex, ring):
    p = np.asarray(ring, np.float32).astype(np.float64).reshape(-1, 2)
    x, y = p[:, 0].copy(), p[:, 1].copy()
    for M in np_maps(ex):
        x, y = M[0, 0] * x + M[0, 1] * y + M[0, 2], M[1, 0] * x + M[1, 1] * y + M[1, 2]
    return np.stack([x, y], 1)


def coco_raster(rings, h, w):
    """pycocotools: frPyObjects of the (already moved) polygons, merged, decoded."""
    rles = mask_api.frPyObjects([np.asarray(r, np.float64).ravel().tolist() for r in rings], h, w)
    return mask_api.decode(mask_api.merge(rles))


def shown(ex):
    """Where the output shows the source image (1) rather than fill (0): an all-ones mask
    through the mask path (nearest neighbour, fill 0)."""
    return T.transform_mask(ex, np.ones(ex["src_shape"], np.uint8))


def random_rings(rng, h=H, w=W, n_rings=None):
    out = []
    for _ in range(n_rings or int(rng.integers(1, 3))):
        n = int(rng.integers(3, 10))
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        r = rng.uniform(5, 40)
        ang = np.sort(rng.uniform(0, 2 * np.pi, n))
        xs = np.clip(cx + r * np.cos(ang), -0.9, w + 0.9)
        ys = np.clip(cy + r * np.sin(ang), -0.9, h + 0.9)
        out.append(np.stack([xs, ys], 1).astype(np.float32))
    return out


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_polygons_match_pycocotools_of_the_moved_vertices(name):
    rng = np.random.default_rng(1)
    n_px = 0
    for index in range(6):
        img, ex = run(CHAINS[name], index=index)
        oh, ow = img.shape[:2]
        for _ in range(4):
            rings = random_rings(rng)
            got = T.transform_polygons(ex, rings)
            want = coco_raster([np_move(ex, r) for r in rings], oh, ow) & shown(ex)
            assert got.shape == (oh, ow) and got.dtype == np.uint8
            np.testing.assert_array_equal(got, want, err_msg=str(ex["ops"]))
            n_px += int(got.sum())
    assert n_px > 1000  # the polygons land in the output, not only outside


def test_polygons_without_ops_equal_pycocotools_and_annotations_raster():
    from fastq.annotations.rle import fill_polygons

    rng = np.random.default_rng(2)
    img, ex = run([O.ColorJitter(0.2)])
    for _ in range(20):
        rings = random_rings(rng)
        got = T.transform_polygons(ex, rings)
        np.testing.assert_array_equal(got, coco_raster(rings, H, W))
        np.testing.assert_array_equal(got, fill_polygons(rings, H, W))


def random_bitmap(rng, h=H, w=W):
    m = np.zeros((h, w), np.uint8)
    x0, y0 = int(rng.integers(0, w - 20)), int(rng.integers(0, h - 20))
    m[y0:y0 + int(rng.integers(5, 40)), x0:x0 + int(rng.integers(5, 60))] = 1
    return m | (rng.random((h, w)) < 0.05).astype(np.uint8)


def test_rle_instances_match_centre_and_cv2_nearest_and_the_mask_path():
    """Pixel centres by default (tests/helpers/mask_ref.py: TF's arithmetic); OpenCV's
    INTER_NEAREST with sampling="legacy"."""
    import cv2

    rng = np.random.default_rng(3)
    for index in range(8):
        _, ex = run([O.RandomResizedCrop((64, 80)), O.HorizontalFlip(0.5), O.VerticalFlip(0.5)], index=index)
        m = random_bitmap(rng)
        r0, r1, r2 = ex["ops"]
        x, y, w, h = r0["box"]
        for sampling, want in (("center", nearest_centre(m[y:y + h, x:x + w], 64, 80)),
                               ("legacy", cv2.resize(m[y:y + h, x:x + w], (80, 64), interpolation=cv2.INTER_NEAREST))):
            if r1["applied"]:
                want = cv2.flip(want, 1)
            if r2["applied"]:
                want = cv2.flip(want, 0)
            np.testing.assert_array_equal(T.transform_rle(ex, rle_encode(m), H, W, sampling=sampling), want)
    for name in sorted(CHAINS):
        for index in range(3):
            _, ex = run(CHAINS[name], index=index)
            m = random_bitmap(rng)
            for sampling in ("center", "legacy"):
                np.testing.assert_array_equal(T.transform_rle(ex, rle_encode(m), H, W, sampling=sampling),
                                              T.transform_mask(ex, m, sampling=sampling))


@pytest.mark.parametrize("name", ["rrc", "resize_up", "center_crop_pad", "random_crop_pad", "flips", "rse_pad",
                                  "scale_jitter", "zoom_out"])
def test_rectangle_polygons_agree_with_their_boxes(name):
    """A box given as a polygon: the bounding box of its mask's pixels is within 1 px per
    side of the transformed box (axis-aligned chains)."""
    rng = np.random.default_rng(4)
    checked = 0
    for index in range(8):
        _, ex = run(CHAINS[name], index=index)
        x0, y0 = rng.uniform(2, W / 2), rng.uniform(2, H / 2)
        x1, y1 = x0 + rng.uniform(15, 50), y0 + rng.uniform(15, 40)
        m = T.transform_polygons(ex, [[x0, y0, x1, y0, x1, y1, x0, y1]])
        b = T.transform_boxes(ex, [[x0, y0, x1, y1]], max_boxes=1)
        ys, xs = np.nonzero(m)
        if b["num_boxes"] == 0 or len(xs) == 0:
            assert len(xs) == 0 or (b["boxes"][0, 2:] - b["boxes"][0, :2]).min() < 2
            continue
        mb = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
        assert np.abs(mb - b["boxes"][0]).max() <= 1 + 1e-4, (mb, b["boxes"][0], ex["ops"])
        checked += 1
    assert checked >= 4


# ---- in a pipeline -----------------------------------------------------------------------------

def _source(n=10, bad=None):
    from fastq.sources import Arrays

    rng = np.random.default_rng(10)
    imgs = [rng.integers(0, 255, (70 + 3 * i, 100 - 2 * i, 3), dtype=np.uint8) for i in range(n)]
    boxes, polys, rles = [], [], []
    for i, im in enumerate(imgs):
        h, w = im.shape[:2]
        k = i % 4 + 1
        ps, rs, bs = [], [], []
        for j in range(k):
            if j % 3 == 2:  # a bitmap instance
                m = random_bitmap(rng, h, w)
                ys, xs = np.nonzero(m)
                rs.append({"size": [h, w], "counts": rle_encode(m).tolist()})
                ps.append(None)
                bs.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
            else:
                rings = random_rings(rng, h, w)
                allp = np.concatenate(rings)
                ps.append(rings)
                rs.append(None)
                bs.append([*np.clip(allp.min(0), 0, None), *np.minimum(allp.max(0), [w, h])])
        boxes.append(np.array(bs, np.float32))
        polys.append(ps)
        rles.append(rs)
    if bad is not None:
        bad(polys, rles, imgs)
    tg = T.Targets(boxes, [np.arange(len(b)) + 1 for b in boxes], max_boxes=3, min_area=4.0, image_info=False,
                   instance_polygons=polys, instance_rles=rles)
    return Arrays(imgs, targets=tg), boxes, polys, rles


OPS = [O.HorizontalFlip(), O.RandomResizedCrop((56, 64), scale=(0.3, 1.0)), O.Rotate((-15, 15), p=0.5)]


def _want(ex, boxes, ps, rs, max_boxes=3, **kw):
    b = T.transform_boxes(ex, boxes, max_boxes=max_boxes, **kw)
    oh, ow = ex["out_shape"][:2]
    out = np.zeros((max_boxes, oh, ow), np.uint8)
    for slot in range(b["num_boxes"]):
        j = b["index"][slot]
        if ps[j] is not None:
            out[slot] = coco_raster([np_move(ex, r) for r in ps[j]], oh, ow) & shown(ex)
        else:
            h, w = rs[j]["size"]
            out[slot] = T.transform_mask(ex, rle_decode(np.array(rs[j]["counts"]), h, w))
    return b, out


def test_pipeline_instance_masks_follow_their_boxes_for_1_and_2_workers():
    import fastq

    src, boxes, polys, rles = _source()
    outs = []
    for workers in (1, 2):
        p = fastq.Pipeline(src, batch_size=4, ops=OPS, dtype="uint8", seed=3, shuffle=True, workers=workers,
                           return_index=True)
        assert p.output_names == ["images", "boxes", "classes", "num_boxes", "instance_masks", "index"]
        assert [s for s, _ in p.output_spec][1:] == [(3, 4), (3,), (), (3, 56, 64), ()]
        assert p.output_spec[4][1] == np.uint8
        outs.append([[np.array(x) for x in b] for b in p])
        seen = 0
        for b in outs[-1]:
            for row, idx in enumerate(b[5]):
                ex = p.explain(0, int(idx))
                want_b, want = _want(ex, boxes[idx], polys[idx], rles[idx], min_area=4.0)
                np.testing.assert_array_equal(b[1][row], want_b["boxes"])
                np.testing.assert_array_equal(b[4][row], want)
                assert b[4][row].sum() > 0 or b[3][row] == 0
                seen += 1
        assert seen == 8  # drop_remainder
    for a, b in zip(*outs):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_instance_masks_from_bitmaps_equal_the_rle_path():
    import fastq
    from fastq.sources import Arrays

    rng = np.random.default_rng(12)
    imgs = [rng.integers(0, 255, (60, 80, 3), dtype=np.uint8) for _ in range(4)]
    bms = [np.stack([random_bitmap(rng, 60, 80) for _ in range(2)]) for _ in imgs]
    boxes = [np.array([[0, 0, 80, 60]] * 2, np.float32) for _ in imgs]
    tg = T.Targets(boxes, max_boxes=2, image_info=False, instance_masks=bms)
    p = fastq.Pipeline(Arrays(imgs, targets=tg), batch_size=4, ops=[O.RandomResizedCrop(48), O.HorizontalFlip()],
                       dtype="uint8", seed=1, return_index=True)
    b = next(iter(p))
    for row, idx in enumerate(b[-1]):
        ex = p.explain(0, int(idx))
        for k in range(2):
            np.testing.assert_array_equal(b[4][row][k], T.transform_mask(ex, bms[idx][k]))


def _write_coco(tmp_path, rng, n=6):
    import cv2
    from fastq.bench.testdata import source_photos

    photos = [img for img in (cv2.imread(p, cv2.IMREAD_COLOR) for p in source_photos()[:8]) if img is not None]
    (tmp_path / "img").mkdir()
    images, anns, aid = [], [], 1
    for k in range(n):
        img = cv2.resize(photos[k % len(photos)], (int(rng.integers(70, 120)), int(rng.integers(60, 100))))
        cv2.imwrite(str(tmp_path / "img" / f"{k:03d}.jpg"), img)
        h, w = img.shape[:2]
        images.append({"id": 10 + k, "file_name": f"img/{k:03d}.jpg", "height": h, "width": w})
        for j in range(k % 4 + 1):
            crowd = int(j == 3)
            if crowd or j == 2:
                m = random_bitmap(rng, h, w)
                enc = mask_api.encode(np.asfortranarray(m))
                seg = {"counts": enc["counts"].decode(), "size": [h, w]} if not crowd else \
                    {"counts": rle_encode(m).tolist(), "size": [h, w]}
                x, y, bw, bh = (float(v) for v in mask_api.toBbox(enc))
            else:
                rings = random_rings(rng, h, w)
                seg = [np.clip(r, 0, [w, h]).ravel().astype(np.float64).round(2).tolist() for r in rings]
                allp = np.concatenate([np.array(s).reshape(-1, 2) for s in seg])
                x, y = allp.min(0)
                bw, bh = allp.max(0) - allp.min(0)
            anns.append({"id": aid, "image_id": 10 + k, "category_id": 1 + j % 2, "iscrowd": crowd,
                         "bbox": [x, y, bw, bh], "area": bw * bh, "segmentation": seg})
            aid += 1
    d = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]}
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(d))
    return path


def test_coco_file_end_to_end_through_a_pipeline(tmp_path):
    """load_coco -> Targets.from_annotations(instance_masks=True) -> Files: each row is
    pycocotools' raster of the moved polygons (polygon objects) or pycocotools' annToMask
    flipped / padded like the image (RLE objects, crowds included)."""
    import fastq
    from pycocotools.coco import COCO

    from fastq.annotations.coco import load_coco

    path = _write_coco(tmp_path, np.random.default_rng(5))
    coco = COCO(str(path))
    ann = load_coco(str(path), first_class=1)
    tg = T.Targets.from_annotations(ann, instance_masks=True)
    ops = [O.HorizontalFlip(), O.Pad(size=(128, 128))]
    src = fastq.sources.Files(ann.keys, targets=tg)
    with fastq.Pipeline(src, batch_size=3, ops=ops, dtype="uint8", seed=2, return_index=True, workers=2) as p:
        assert p.output_names[-2:] == ["instance_masks", "index"]
        seen = n_rle = n_poly = 0
        for images, boxes, classes, num, info, inst, idx in p:
            assert inst.shape == (3, tg.max_boxes, 128, 128)
            for row, i in enumerate(idx.tolist()):
                ex = p.explain(0, i)
                flipped = ex["ops"][0]["applied"]
                objs = coco.loadAnns(coco.getAnnIds(imgIds=[int(ann.image_ids[i])]))
                assert num[row] == len(objs)
                for slot, o in enumerate(objs):
                    h, w = coco.imgs[o["image_id"]]["height"], coco.imgs[o["image_id"]]["width"]
                    if isinstance(o["segmentation"], list):
                        want = coco_raster([np_move(ex, np.array(s, np.float32)) for s in o["segmentation"]],
                                           128, 128)
                        n_poly += 1
                    else:
                        m = coco.annToMask(o)
                        m = m[:, ::-1] if flipped else m
                        want = np.zeros((128, 128), np.uint8)
                        want[:h, :w] = m
                        n_rle += 1
                    np.testing.assert_array_equal(inst[row][slot], want)
                assert (inst[row][len(objs):] == 0).all()
                seen += 1
    assert seen == len(ann) and n_rle >= 2 and n_poly >= 4


def test_from_annotations_drops_crowd_instances_with_their_boxes(tmp_path):
    from fastq.annotations.coco import load_coco

    path = _write_coco(tmp_path, np.random.default_rng(6))
    ann = load_coco(str(path))
    kept = T.Targets.from_annotations(ann, crowd="drop", instance_masks=True)
    sel = np.flatnonzero(ann.iscrowd == 0)
    assert len(kept.instances["kind"]) == len(sel) == len(kept.boxes)
    np.testing.assert_array_equal(kept.instances["kind"], ann.seg_kind[sel])
    j = 0
    for k in sel:  # every kept object's polygons / runs, in order
        got_rings = kept.instances["ring"][kept.instances["poly"][j]:kept.instances["poly"][j + 1] + 1]
        pts = [kept.instances["xy"][got_rings[r]:got_rings[r + 1]] for r in range(len(got_rings) - 1)]
        for a, b in zip(pts, ann.polygons(k)):
            np.testing.assert_array_equal(a, b)
        got_c = kept.instances["counts"][kept.instances["rle"][j]:kept.instances["rle"][j + 1]]
        want_c = ann.rle(k)
        np.testing.assert_array_equal(got_c, want_c if want_c is not None else [])
        j += 1


# ---- instance_mask_size: each kept instance in its box at M x M (Mask R-CNN targets) -------------

def box_frame(pts, box, mh, mw):
    """detectron2's PolygonMasks.crop_and_resize on the moved vertices (float64)."""
    x0, y0, x1, y1 = (float(v) for v in np.asarray(box, np.float32))
    p = np.array(pts, np.float64)
    p[:, 0] = (p[:, 0] - x0) * (mw / max(x1 - x0, 0.1))
    p[:, 1] = (p[:, 1] - y0) * (mh / max(y1 - y0, 0.1))
    return p


def np_box_sample(m, box, mh, mw):
    x0, y0, x1, y1 = (float(v) for v in np.asarray(box, np.float32))
    ys = np.clip(np.floor(y0 + (np.arange(mh) + 0.5) * ((y1 - y0) / mh)), 0, m.shape[0] - 1).astype(int)
    xs = np.clip(np.floor(x0 + (np.arange(mw) + 0.5) * ((x1 - x0) / mw)), 0, m.shape[1] - 1).astype(int)
    return m[ys][:, xs]


@pytest.mark.parametrize("name", ["rrc", "affine", "chain", "rse_pad"])
def test_polygons_in_their_box_match_pycocotools(name):
    rng = np.random.default_rng(7)
    for index in range(5):
        _, ex = run(CHAINS[name], index=index)
        rings = random_rings(rng)
        moved = [np_move(ex, r) for r in rings]
        allp = np.concatenate(moved)
        box = np.array([*allp.min(0), *allp.max(0)], np.float32)
        for mh, mw in ((28, 28), (14, 20)):
            got = T.transform_polygons(ex, rings, box=box, size=(mh, mw))
            want = coco_raster([box_frame(m, box, mh, mw) for m in moved], mh, mw)
            np.testing.assert_array_equal(got, want)
            assert got.sum() > 0


def test_pipeline_instance_mask_size_gives_each_instance_in_its_box():
    import fastq
    from fastq.sources import Arrays

    src, boxes, polys, rles = _source()
    tg = src.targets
    tg2 = T.Targets([boxes[i] for i in range(len(boxes))], [np.arange(len(b)) + 1 for b in boxes], max_boxes=3,
                    min_area=4.0, image_info=False, instance_polygons=polys, instance_rles=rles,
                    instance_mask_size=(28, 24))
    assert tg2.instances is not None and tg.instances is not None
    p = fastq.Pipeline(Arrays(src._items, targets=tg2), batch_size=4, ops=OPS, dtype="uint8", seed=3, workers=2,
                       return_index=True)
    assert [s for s, _ in p.output_spec][4] == (3, 28, 24)
    n_poly = n_rle = 0
    for b in p:
        for row, idx in enumerate(b[5]):
            ex = p.explain(0, int(idx))
            want_b, full = _want(ex, boxes[idx], polys[idx], rles[idx], min_area=4.0)
            for slot in range(3):
                if slot >= want_b["num_boxes"]:
                    assert (b[4][row][slot] == 0).all()
                    continue
                j, box = want_b["index"][slot], b[1][row][slot]
                if polys[idx][j] is not None:
                    want = coco_raster([box_frame(np_move(ex, r), box, 28, 24) for r in polys[idx][j]], 28, 24)
                    n_poly += 1
                else:
                    want = np_box_sample(full[slot], box, 28, 24)
                    n_rle += 1
                np.testing.assert_array_equal(b[4][row][slot], want)
    assert n_poly >= 4 and n_rle >= 1


def test_odapi_png_instance_masks_through_load_odapi(tmp_path):
    """OD-API shards with image/object/mask PNGs (written by encode_odapi_example):
    load_odapi(masks=True) keeps them as RLE; through Bytes + from_annotations each row
    is the PNG's own pixels resized at pixel centres (mask_ref), flipped as drawn; with
    mask_sampling="legacy", cv2's nearest resize instead."""
    import cv2

    import fastq
    from fastq.annotations.odapi import OdapiFormatError, encode_odapi_example, load_odapi
    from fastq.tfrecord_codec import tfrecord_frame
    from fastq.sources import Bytes

    rng = np.random.default_rng(14)
    recs, images, bitmaps = [], [], []
    for i in range(4):
        h, w = 50 + 4 * i, 70 - 3 * i
        img = cv2.imencode(".png", rng.integers(0, 255, (h, w, 3), dtype=np.uint8))[1].tobytes()
        ms = [random_bitmap(rng, h, w) * 255 for _ in range(1 + i % 2)]
        boxes = [[0, 0, w, h]] * len(ms)
        pngs = [cv2.imencode(".png", m)[1].tobytes() for m in ms]
        recs.append(encode_odapi_example(img, h, w, boxes, [1] * len(ms), instance_masks=pngs if i != 3 else None))
        images.append(img)
        bitmaps.append(ms if i != 3 else None)
    shard = tmp_path / "a.tfrecord"
    shard.write_bytes(b"".join(tfrecord_frame(r) for r in recs))
    ann = load_odapi([shard], masks=True)
    assert list(ann.seg_kind) == [2, 2, 2, 2, 0, 0]
    for sampling in ("center", "legacy"):
        tg = T.Targets.from_annotations(ann, instance_masks=True, mask_sampling=sampling)
        p = fastq.Pipeline(Bytes(images, targets=tg), batch_size=4,
                           ops=[O.Resize((40, 48), interpolation="nearest"), O.HorizontalFlip()], dtype="uint8", seed=4)
        b = next(iter(p))
        for i in range(4):
            ex = p.explain(0, i)
            for k in range(2):
                if bitmaps[i] is None or k >= len(bitmaps[i]):
                    assert (b[5][i][k] == 0).all()
                    continue
                m = (bitmaps[i][k] != 0).astype(np.uint8)
                want = nearest_centre(m, 40, 48) if sampling == "center" else \
                    cv2.resize(m, (48, 40), interpolation=cv2.INTER_NEAREST)
                np.testing.assert_array_equal(b[5][i][k], cv2.flip(want, 1) if ex["ops"][1]["applied"] else want)
        del b
        p.close()
    bad = encode_odapi_example(images[0], 50, 70, [[0, 0, 5, 5]], [1], instance_masks=[b"not a png"])
    (tmp_path / "b.tfrecord").write_bytes(tfrecord_frame(bad))
    with pytest.raises(OdapiFormatError, match="record 0: image/object/mask 0 cannot be decoded"):
        load_odapi([tmp_path / "b.tfrecord"], masks=True)


# ---- bad input -----------------------------------------------------------------------------------

def _nan(polys, rles, imgs):
    polys[2][1] = [np.array([[np.nan, 1], [5, 5], [9, 1]], np.float32)]


def _two_points(polys, rles, imgs):
    polys[2][1] = [np.array([[1, 1], [5, 5]], np.float32)]


def _bad_rle_sum(polys, rles, imgs):
    rles[2][2] = np.array([5, 10], np.uint32)  # raw runs: checked against the decoded image, in the worker


@pytest.mark.parametrize("mutate,match", [
    (_nan, "sample 2: targets: instance 1: polygon 0, point 0: coordinates must be finite"),
    (_two_points, "sample 2: targets: instance 1: polygon 0 has 2 points, needs at least 3"),
    (_bad_rle_sum, r"sample 2: targets: instance 2: RLE runs cover 15 pixels, the 96x76 mask has 7296"),
])
def test_bad_instances_fail_their_sample_and_skip_replaces_it(mutate, match):
    import fastq

    src, *_ = _source(bad=mutate)
    p = fastq.Pipeline(src, batch_size=5, ops=[O.CenterCrop(48)], dtype="uint8")
    with pytest.raises(errors.FastqError, match=match):
        list(p)
    p = fastq.Pipeline(src, batch_size=5, ops=[O.CenterCrop(48)], dtype="uint8", on_error="skip")
    assert sum(len(b[0]) for b in p) == 10 and p.stats()["skipped"] == 1


def test_rle_of_another_size_than_the_image_fails_its_sample():
    import fastq
    from fastq.sources import Arrays

    imgs = np.zeros((3, 20, 30, 3), np.uint8)
    m = np.ones((30, 20), np.uint8)  # transposed: as many pixels, wrong shape
    tg = T.Targets([np.array([[0, 0, 5, 5]], np.float32)] * 3, max_boxes=1,
                   instance_rles=[[None], [None], [{"size": [30, 20], "counts": rle_encode(m).tolist()}]])
    p = fastq.Pipeline(Arrays(imgs, targets=tg), batch_size=3, ops=[O.CenterCrop(16)], dtype="uint8")
    with pytest.raises(errors.FastqError, match="sample 2: targets: instance 0: RLE of a 20x30 mask for a 30x20 image"):
        list(p)


def test_bad_instance_arguments_are_refused_at_construction():
    b = [np.array([[0, 0, 5, 5]], np.float32)] * 2
    with pytest.raises(ValueError, match="sample 1: 1 boxes but 2 instance polygons"):
        T.Targets(b, instance_polygons=[[None], [None, None]])
    with pytest.raises(ValueError, match="2 samples of boxes but 1 of instance_rles"):
        T.Targets(b, instance_rles=[[None]])
    with pytest.raises(ValueError, match="sample 0: instance 0 has both a polygon and an RLE mask"):
        T.Targets(b, instance_polygons=[[[[0, 0, 1, 1, 2, 0]]], [None]], instance_rles=[[[5]], [None]])
    with pytest.raises(ValueError, match="x, y pairs"):
        T.Targets(b, instance_polygons=[[[[0, 0, 1, 1, 2]]], [None]])
    with pytest.raises(ValueError, match="instance_masks must be"):
        T.Targets(b, instance_masks=[np.zeros((2, 4, 4), np.uint8), np.zeros((1, 4, 4), np.uint8)])
    with pytest.raises(ValueError, match="runs cover"):
        T.Targets(b, instance_rles=[[{"size": [4, 4], "counts": [3, 4]}], [None]])
    with pytest.raises(ValueError, match="run lengths must be integers"):
        T.Targets(b, instance_rles=[[np.array([-1, 3])], [None]])
    with pytest.raises(ValueError, match="need boxes"):
        T.Targets([np.zeros((0, 4))] * 2, max_boxes=0, instance_polygons=[[], []])
    with pytest.raises(ValueError, match="instance_mask_size must be"):
        T.Targets(b, instance_polygons=[[None], [None]], instance_mask_size=(0, 28))
    with pytest.raises(ValueError, match="instance_mask_size without instance masks"):
        T.Targets(b, instance_mask_size=28)


def test_direct_calls_refuse_bad_polygons_and_rle():
    _, ex = run([O.CenterCrop(40)])
    with pytest.raises(errors.FastqError, match="lies outside the 128x96 source image"):
        T.transform_polygons(ex, [[0, 0, 500, 0, 10, 10]])
    with pytest.raises(errors.FastqError, match="needs at least 3"):
        T.transform_polygons(ex, [[0, 0, 5, 5]])
    with pytest.raises(errors.FastqError, match="RLE runs cover 12289 pixels"):
        T.transform_rle(ex, [H * W, 1], H, W)
    with pytest.raises(ValueError, match="run lengths must be integers"):
        T.transform_rle(ex, [2 ** 32], H, W)


def test_tf_dataset_features_labels_names_instance_masks():
    pytest.importorskip("tensorflow", reason="TensorFlow is optional (requirements-dev.txt)")
    import fastq
    import fastq.tf as fqtf
    from fastq.sources import Arrays

    rng = np.random.default_rng(13)
    imgs = [rng.integers(0, 255, (60, 80, 3), dtype=np.uint8) for _ in range(4)]
    boxes = [np.array([[10, 10, 50, 40]], np.float32)] * 4
    rings = [[[np.array([[10, 10], [50, 12], [30, 40]], np.float32)]]] * 4
    tg = T.Targets(boxes, [[1]] * 4, max_boxes=2, image_info=False, instance_polygons=rings)
    p = fastq.Pipeline(Arrays(imgs, targets=tg), batch_size=2, ops=[O.Resize((48, 64))], dtype="uint8")
    ds = fqtf.dataset(p, structure="features_labels")
    x, y = next(iter(ds))
    assert sorted(y) == ["boxes", "classes", "instance_masks", "num_boxes"]
    assert tuple(y["instance_masks"].shape) == (2, 2, 48, 64)
    ex = p.explain(0, 0)
    want = coco_raster([np_move(ex, rings[0][0][0])], 48, 64)
    np.testing.assert_array_equal(y["instance_masks"].numpy()[0][0], want)
    assert (y["instance_masks"].numpy()[:, 1] == 0).all()
    p.close()
