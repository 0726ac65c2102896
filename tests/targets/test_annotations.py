"""fastq.annotations: COCO against pycocotools, OD-API records against TensorFlow's own
Example serializer and parser, segmentation layouts against the files on disk."""
import json
import os

import numpy as np
import pytest

from fastq.annotations import SEG_POLYGONS, SEG_RLE
from fastq.annotations.coco import CocoFormatError, load_coco
from fastq.annotations.odapi import (BBOX_KEYS, CLASS_KEY, OdapiFormatError, encode_odapi_example, load_odapi)
from fastq.annotations.rle import (RleError, fill_polygons, polygon_rle, rle_decode, rle_encode, rle_from_object,
                                   rle_from_string)
from fastq.annotations.segmentation import MissingMaskError, segmentation_pairs
from fastq.tfrecord_codec import tfrecord_frame

mask_api = pytest.importorskip("pycocotools.mask", reason="pycocotools is in requirements-dev.txt")

# pycocotools 2.0.11's decode trips numpy 2's __array__(copy=) deprecation: not ours
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword")


def _random_polygon(rng, h, w, n=None):
    n = int(rng.integers(3, 12)) if n is None else n
    return np.stack([rng.uniform(-5, w + 5, n), rng.uniform(-5, h + 5, n)], 1)


# ---------------------------------------------------------------------------
# RLE and polygons vs pycocotools
# ---------------------------------------------------------------------------

def test_polygon_raster_equals_pycocotools():
    rng = np.random.default_rng(0)
    for t in range(300):
        h, w = int(rng.integers(5, 130)), int(rng.integers(5, 170))
        xy = _random_polygon(rng, h, w)
        if t % 4 == 0:
            xy = np.round(xy)  # integer vertices (typical of hand-drawn polygons)
        if t % 9 == 0:
            xy[2] = xy[1]  # a repeated vertex
        ref = mask_api.decode(mask_api.frPyObjects([xy.ravel().tolist()], h, w))[:, :, 0]
        assert np.array_equal(fill_polygons([xy], h, w), ref), t
        rle = mask_api.frPyObjects([xy.ravel().tolist()], h, w)[0]
        assert rle_from_string(rle["counts"], h, w).tolist() == polygon_rle(xy, h, w).tolist()


def test_polygon_union_equals_pycocotools_merge():
    rng = np.random.default_rng(1)
    for _ in range(50):
        h, w = 60, 80
        rings = [_random_polygon(rng, h, w, 5) for _ in range(3)]
        ref = mask_api.decode(mask_api.merge(mask_api.frPyObjects([r.ravel().tolist() for r in rings], h, w)))
        assert np.array_equal(fill_polygons(rings, h, w), ref)


def test_rle_string_and_list_roundtrip_vs_pycocotools():
    rng = np.random.default_rng(2)
    for t in range(100):
        h, w = int(rng.integers(1, 70)), int(rng.integers(1, 90))
        m = (rng.random((h, w)) < rng.uniform(0.05, 0.95)).astype(np.uint8)
        if t % 5 == 0:
            m[:] = t % 2  # all zeros or all ones
        enc = mask_api.encode(np.asfortranarray(m))
        counts = rle_from_string(enc["counts"], h, w)
        assert np.array_equal(rle_decode(counts, h, w), m)
        assert np.array_equal(rle_encode(m), counts)
        # the uncompressed form (iscrowd annotations): a list of ints
        unc = rle_from_object({"counts": counts.tolist(), "size": [h, w]}, h, w)
        assert np.array_equal(unc, counts)


@pytest.mark.parametrize("counts, why", [
    ([5, 5], "runs cover 10 pixels"),
    ([3, -1, 98], "negative run"),
    ("0!", "not an RLE digit"),
    ("o", "end inside a run"),
])
def test_bad_rle_is_refused(counts, why):
    with pytest.raises(RleError, match=why):
        rle_from_object({"counts": counts, "size": [10, 10]}, 10, 10, "ann 7")


def test_rle_of_another_size_is_refused():
    with pytest.raises(RleError, match="differs from the image"):
        rle_from_object({"counts": [100], "size": [10, 10]}, 10, 12)


# ---------------------------------------------------------------------------
# COCO vs pycocotools
# ---------------------------------------------------------------------------

def _coco_dict(rng, n_images=6):
    cats = [{"id": i, "name": f"c{i}", "supercategory": "x"} for i in (3, 1, 90, 17)]
    images, anns = [], []
    aid = 100
    for k in range(n_images):
        h, w = int(rng.integers(40, 120)), int(rng.integers(40, 160))
        iid = 1000 + 7 * k
        images.append({"id": iid, "file_name": f"img/{k:03d}.jpg", "height": h, "width": w})
        for j in range(int(rng.integers(0, 5)) if k else 0):  # image 0: no objects
            x, y = rng.uniform(0, w - 10), rng.uniform(0, h - 10)
            bw, bh = rng.uniform(1, w - x), rng.uniform(1, h - y)
            crowd = int(j == 3)
            if crowd:
                m = np.zeros((h, w), np.uint8)
                m[int(y):int(y + bh), int(x):int(x + bw)] = 1
                seg = {"counts": rle_encode(m).tolist(), "size": [h, w]}  # uncompressed, as COCO's crowds
            elif j == 2:
                m = (rng.random((h, w)) < 0.3).astype(np.uint8)
                enc = mask_api.encode(np.asfortranarray(m))
                seg = {"counts": enc["counts"].decode(), "size": [h, w]}
            else:
                seg = [_random_polygon(rng, h, w, 6).ravel().tolist() for _ in range(1 + j % 2)]
            anns.append({"id": aid, "image_id": iid, "category_id": cats[(k + j) % 4]["id"], "iscrowd": crowd,
                         "bbox": [x, y, bw, bh], "area": bw * bh, "segmentation": seg})
            aid += 1
    anns.append({"id": aid, "image_id": images[1]["id"], "category_id": 1, "iscrowd": 0, "bbox": [5, 5, 0, 3],
                 "area": 0, "segmentation": []})  # degenerate: dropped and counted
    return {"images": images, "annotations": anns, "categories": cats}


def test_coco_matches_pycocotools(tmp_path):
    from pycocotools.coco import COCO
    d = _coco_dict(np.random.default_rng(3))
    path = tmp_path / "instances_train.json"
    path.write_text(json.dumps(d))
    ann = load_coco(str(path), first_class=1)
    ref = COCO(str(path))
    assert [int(i) for i in ann.image_ids] == [im["id"] for im in d["images"]]
    assert ann.keys[2] == os.path.join(str(tmp_path), d["images"][2]["file_name"])
    cat_ids = sorted(ref.getCatIds())  # file order there; detectron2 and torchvision's references sort
    assert ann.category_ids.tolist() == cat_ids
    assert ann.category_names == [c["name"] for c in ref.loadCats(cat_ids)]
    assert ann.stats["degenerate_dropped"] == 1
    for i, iid in enumerate(ann.image_ids.tolist()):
        objs = [a for a in ref.loadAnns(ref.getAnnIds(imgIds=[iid])) if a["bbox"][2] > 0 and a["bbox"][3] > 0]
        s = ann.sample(i)
        assert len(objs) == len(s["boxes"])
        info = ref.loadImgs([iid])[0]
        a0 = int(ann.box_offsets[i])
        for k, o in enumerate(objs):
            x, y, w, h = o["bbox"]
            np.testing.assert_array_equal(s["boxes"][k], np.float32([x, y, x + w, y + h]))
            assert ann.category_ids[s["classes"][k] - 1] == o["category_id"]
            assert s["iscrowd"][k] == o["iscrowd"]
            got = ann.instance_mask(a0 + k, info["height"], info["width"])
            assert np.array_equal(got, ref.annToMask(o)), (iid, k)
            kind = ann.seg_kind[a0 + k]
            assert kind == (SEG_POLYGONS if isinstance(o["segmentation"], list) else SEG_RLE)
    assert ann.max_boxes == max(ann.num_boxes(i) for i in range(len(ann)))


def test_coco_options(tmp_path):
    d = _coco_dict(np.random.default_rng(4))
    n_crowd = sum(a["iscrowd"] for a in d["annotations"])
    assert n_crowd > 0
    full = load_coco(d, image_root="/data")
    dropped = load_coco(d, image_root="/data", crowd="drop", skip_empty=True, masks=False)
    assert dropped.stats["crowd_dropped"] == n_crowd
    assert len(dropped.boxes) == len(full.boxes) - n_crowd
    assert not dropped.iscrowd.any() and dropped.seg_kind is None
    assert dropped.stats["empty_dropped"] >= 1 and all(dropped.num_boxes(i) for i in range(len(dropped)))
    assert full.keys[0] == "/data/img/000.jpg" and full.classes.min() == 0


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d["annotations"][0].update(image_id=5), "annotation id 100: image_id 5 is not in 'images'"),
    (lambda d: d["annotations"][0].update(category_id=2), "category_id 2 is not in 'categories'"),
    (lambda d: d["annotations"][0].update(bbox=[1, 2, 3]), "is not 4 numbers"),
    (lambda d: d["annotations"][0].update(bbox=[1, float("nan"), 3, 4]), "is not finite"),
    (lambda d: d["annotations"][0].update(segmentation=[[1, 2, 3]]), "even number"),
    (lambda d: d["annotations"][0].update(segmentation={"counts": [1, 2], "size": [3, 3]}), "differs from"),
    (lambda d: d["images"].append(dict(d["images"][0])), "appears twice"),
    (lambda d: d.pop("categories"), "no 'categories'"),
])
def test_coco_bad_input_names_the_annotation(tmp_path, mutate, match):
    d = _coco_dict(np.random.default_rng(5))
    mutate(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d, allow_nan=True))
    with pytest.raises(CocoFormatError, match=match) as e:
        load_coco(str(path))
    assert str(path) in str(e.value)


def test_coco_not_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{not json")
    with pytest.raises(CocoFormatError, match="not valid JSON"):
        load_coco(str(p))


# ---------------------------------------------------------------------------
# OD-API TFRecord vs TensorFlow
# ---------------------------------------------------------------------------

def _odapi_samples(rng, n=5):
    out = []
    for k in range(n):
        h, w = int(rng.integers(30, 90)), int(rng.integers(30, 120))
        m = int(rng.integers(0, 4))
        x0, y0 = rng.uniform(0, w / 2, m), rng.uniform(0, h / 2, m)
        boxes = np.stack([x0, y0, x0 + rng.uniform(1, w / 2, m), y0 + rng.uniform(1, h / 2, m)], 1) if m else \
            np.zeros((0, 4))
        out.append(dict(image=bytes(rng.integers(0, 256, 50, dtype=np.uint8)), height=h, width=w, boxes=boxes,
                        classes=rng.integers(1, 91, m), is_crowd=(np.arange(m) == 1).astype(int),
                        instance_masks=[b"png%d" % j for j in range(m)], segmentation=b"seg" if k % 2 else None))
    return out


@pytest.mark.tf
def test_odapi_encoder_is_tf_serializer_and_parser_agrees(tmp_path):
    import tensorflow as tf
    samples = _odapi_samples(np.random.default_rng(6))
    shard = tmp_path / "train-00000-of-00001"
    with tf.io.TFRecordWriter(str(shard)) as wr:
        for s in samples:
            b = s["boxes"]
            f = tf.train.Feature
            ex = tf.train.Example(features=tf.train.Features(feature={
                "image/encoded": f(bytes_list=tf.train.BytesList(value=[s["image"]])),
                "image/format": f(bytes_list=tf.train.BytesList(value=[b"jpeg"])),
                "image/filename": f(bytes_list=tf.train.BytesList(value=[b""])),
                "image/source_id": f(bytes_list=tf.train.BytesList(value=[b""])),
                "image/height": f(int64_list=tf.train.Int64List(value=[s["height"]])),
                "image/width": f(int64_list=tf.train.Int64List(value=[s["width"]])),
                BBOX_KEYS[0]: f(float_list=tf.train.FloatList(value=(b[:, 0] / s["width"]).astype(np.float32))),
                BBOX_KEYS[1]: f(float_list=tf.train.FloatList(value=(b[:, 1] / s["height"]).astype(np.float32))),
                BBOX_KEYS[2]: f(float_list=tf.train.FloatList(value=(b[:, 2] / s["width"]).astype(np.float32))),
                BBOX_KEYS[3]: f(float_list=tf.train.FloatList(value=(b[:, 3] / s["height"]).astype(np.float32))),
                CLASS_KEY: f(int64_list=tf.train.Int64List(value=s["classes"])),
                "image/object/is_crowd": f(int64_list=tf.train.Int64List(value=s["is_crowd"])),
                "image/object/mask": f(bytes_list=tf.train.BytesList(value=s["instance_masks"])),
                **({"image/segmentation/class/encoded": f(bytes_list=tf.train.BytesList(value=[s["segmentation"]]))}
                   if s["segmentation"] is not None else {}),
            }))
            ours = encode_odapi_example(s["image"], s["height"], s["width"], b, s["classes"],
                                        is_crowd=s["is_crowd"], instance_masks=s["instance_masks"],
                                        segmentation=s["segmentation"])
            assert tf.train.Example.FromString(ours) == ex
            assert ours == ex.SerializeToString(deterministic=True)
            wr.write(ex.SerializeToString())
    ann = load_odapi(str(shard))
    spec = {k: tf.io.VarLenFeature(tf.float32) for k in BBOX_KEYS}
    spec.update({CLASS_KEY: tf.io.VarLenFeature(tf.int64), "image/height": tf.io.FixedLenFeature([], tf.int64),
                 "image/width": tf.io.FixedLenFeature([], tf.int64)})
    for i, raw in enumerate(tf.data.TFRecordDataset(str(shard))):
        p = tf.io.parse_single_example(raw, spec)
        h, w = int(p["image/height"]), int(p["image/width"])
        cols = [tf.sparse.to_dense(p[k]).numpy().astype(np.float64) for k in BBOX_KEYS]
        ref = np.stack([cols[0] * w, cols[1] * h, cols[2] * w, cols[3] * h], 1).astype(np.float32)
        s = ann.sample(i)
        assert s["key"] == f"{shard}:{i}" and (s["height"], s["width"]) == (h, w)
        np.testing.assert_array_equal(s["boxes"], ref.reshape(-1, 4))
        np.testing.assert_array_equal(s["classes"], tf.sparse.to_dense(p[CLASS_KEY]).numpy())
        np.testing.assert_array_equal(s["iscrowd"], samples[i]["is_crowd"])
    assert ann.stats["with_segmentation"] == sum(s["segmentation"] is not None for s in samples)


def test_odapi_bad_records_name_the_record(tmp_path):
    s = _odapi_samples(np.random.default_rng(7), 2)
    good = encode_odapi_example(s[0]["image"], s[0]["height"], s[0]["width"], [[1, 2, 3, 4]], [5])
    from fastq.tfrecord_codec import encode_example
    bad = encode_example({"image/height": 10, "image/width": 10, BBOX_KEYS[0]: [0.1, 0.2], BBOX_KEYS[1]: [0.1],
                          BBOX_KEYS[2]: [0.5], BBOX_KEYS[3]: [0.5], CLASS_KEY: [1]})
    shard = tmp_path / "s.tfrecord"
    shard.write_bytes(tfrecord_frame(good) + tfrecord_frame(bad))
    with pytest.raises(OdapiFormatError, match=r"s.tfrecord', record 1: bbox .* different lengths"):
        load_odapi(shard)
    shard.write_bytes(tfrecord_frame(good) + tfrecord_frame(good)[:-3])
    with pytest.raises(OdapiFormatError, match="framing error after record 0"):
        load_odapi(shard)
    nosize = encode_example({CLASS_KEY: [1]})
    shard.write_bytes(tfrecord_frame(nosize))
    with pytest.raises(OdapiFormatError, match="record 0: image/height and image/width"):
        load_odapi(shard)


def test_odapi_roundtrip_without_tf(tmp_path):
    s = _odapi_samples(np.random.default_rng(8), 4)
    shard = tmp_path / "a.tfrecord"
    shard.write_bytes(b"".join(tfrecord_frame(encode_odapi_example(x["image"], x["height"], x["width"], x["boxes"],
                                                                   x["classes"])) for x in s))
    ann = load_odapi([shard])
    assert len(ann) == 4
    for i, x in enumerate(s):
        # stored normalized as float32, read back in absolute pixels
        want = (x["boxes"] / [x["width"], x["height"], x["width"], x["height"]]).astype(np.float32)
        want = (want.astype(np.float64) * [x["width"], x["height"], x["width"], x["height"]]).astype(np.float32)
        np.testing.assert_array_equal(ann.sample(i)["boxes"], want.reshape(-1, 4))


# ---------------------------------------------------------------------------
# segmentation pairs
# ---------------------------------------------------------------------------

def _touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").close()


def test_pairs_layout(tmp_path):
    for rel in ("a.jpg", "sub/b.png", "c.jpeg"):
        _touch(tmp_path / "images" / rel)
    for rel in ("a.png", "sub/b.png", "c.png", "orphan.png"):
        _touch(tmp_path / "masks" / rel)
    ann = segmentation_pairs(str(tmp_path))
    assert [os.path.relpath(k, tmp_path) for k in ann.keys] == ["images/a.jpg", "images/c.jpeg", "images/sub/b.png"]
    assert [os.path.relpath(m, tmp_path) for m in ann.mask_keys] == ["masks/a.png", "masks/c.png", "masks/sub/b.png"]
    assert ann.stats["unpaired_masks"] == 1 and len(ann.boxes) == 0
    os.remove(tmp_path / "masks" / "c.png")
    with pytest.raises(MissingMaskError, match=r"images/c.jpeg' has no label map"):
        segmentation_pairs(str(tmp_path))
    ann = segmentation_pairs(str(tmp_path), missing="skip")
    assert len(ann) == 2 and ann.stats["missing_masks"] == 1


def test_voc_ade_cityscapes_layouts(tmp_path):
    voc = tmp_path / "voc"
    for i in ("2007_000032", "2007_000039"):
        _touch(voc / "JPEGImages" / f"{i}.jpg")
        _touch(voc / "SegmentationClass" / f"{i}.png")
    _touch(voc / "JPEGImages" / "2007_000099.jpg")  # not in the split
    os.makedirs(voc / "ImageSets" / "Segmentation")
    (voc / "ImageSets" / "Segmentation" / "train.txt").write_text("2007_000039\n2007_000032\n")
    ann = segmentation_pairs(str(voc), "voc")
    assert [os.path.basename(k) for k in ann.keys] == ["2007_000032.jpg", "2007_000039.jpg"]
    assert [os.path.basename(k) for k in ann.mask_keys] == ["2007_000032.png", "2007_000039.png"]

    ade = tmp_path / "ade"
    for n in ("ADE_train_00000001", "ADE_train_00000002"):
        _touch(ade / "images" / "training" / f"{n}.jpg")
        _touch(ade / "annotations" / "training" / f"{n}.png")
    ann = segmentation_pairs(str(ade), "ade20k")
    assert len(ann) == 2 and ann.mask_keys[1].endswith("annotations/training/ADE_train_00000002.png")

    cs = tmp_path / "cs"
    for city, n in (("aachen", "aachen_000000_000019"), ("bochum", "bochum_000000_000313")):
        _touch(cs / "leftImg8bit" / "train" / city / f"{n}_leftImg8bit.png")
        for t in ("labelIds", "labelTrainIds", "color"):
            _touch(cs / "gtFine" / "train" / city / f"{n}_gtFine_{t}.png")
    ann = segmentation_pairs(str(cs), "cityscapes", target="labelTrainIds")
    assert [os.path.basename(m) for m in ann.mask_keys] == ["aachen_000000_000019_gtFine_labelTrainIds.png",
                                                            "bochum_000000_000313_gtFine_labelTrainIds.png"]
    with pytest.raises(ValueError, match="layout must be one of"):
        segmentation_pairs(str(cs), "kitti")


# ---------------------------------------------------------------------------
# annotations -> pipeline targets
# ---------------------------------------------------------------------------

def _write_jpegs(tmp_path, n, rng):
    import cv2
    from fastq.bench.testdata import source_photos
    photos = [img for img in (cv2.imread(p, cv2.IMREAD_COLOR) for p in source_photos()[:8]) if img is not None]
    images = []
    for k in range(n):
        img = cv2.resize(photos[k % len(photos)], (int(rng.integers(60, 120)), int(rng.integers(50, 100))))
        os.makedirs(tmp_path / "img", exist_ok=True)
        cv2.imwrite(str(tmp_path / "img" / f"{k:03d}.jpg"), img)
        images.append(img.shape[:2])
    return images


def test_coco_annotations_flow_through_a_pipeline(tmp_path):
    """load_coco -> Targets.from_annotations -> Files(targets=...): each batch row's boxes
    and classes are the COCO objects of that image moved by the same sample's explain
    record (fastq.targets.transform_boxes), crowd objects left out."""
    import fastq
    from fastq import ops as O
    from fastq import targets as T
    rng = np.random.default_rng(9)
    sizes = _write_jpegs(tmp_path, 6, rng)
    d = _coco_dict(np.random.default_rng(3), n_images=6)
    for im, (h, w) in zip(d["images"], sizes):
        im["height"], im["width"] = h, w
    for a in d["annotations"]:  # boxes inside their (new) image
        im = next(i for i in d["images"] if i["id"] == a["image_id"])
        x, y = a["bbox"][0] % (im["width"] - 5), a["bbox"][1] % (im["height"] - 5)
        a["bbox"] = [x, y, max(1.0, min(a["bbox"][2], im["width"] - x)), max(1.0, min(a["bbox"][3], im["height"] - y))]
        a["segmentation"] = []
    (tmp_path / "instances.json").write_text(json.dumps(d))
    ann = load_coco(str(tmp_path / "instances.json"), first_class=1)
    targets = T.Targets.from_annotations(ann, crowd="drop")
    n_objs = [int((ann.iscrowd[ann.box_offsets[i]:ann.box_offsets[i + 1]] == 0).sum()) for i in range(len(ann))]
    assert targets.max_boxes == max(n_objs)
    ops = [O.ResizeShortestEdge(64, 96), O.HorizontalFlip(), O.Pad(size=(96, 96))]
    src = fastq.sources.Files(ann.keys, targets=targets)
    with fastq.Pipeline(src, batch_size=3, ops=ops, dtype="uint8", seed=5, return_index=True, workers=2) as p:
        seen = 0
        for images, boxes, classes, num, info, idx in p:
            for row, i in enumerate(idx.tolist()):
                s = ann.sample(i)
                keep = s["iscrowd"] == 0
                want = T.transform_boxes(p.explain(0, i), s["boxes"][keep], s["classes"][keep],
                                         max_boxes=targets.max_boxes)
                assert num[row] == want["num_boxes"] == n_objs[i]
                np.testing.assert_array_equal(boxes[row], want["boxes"])
                np.testing.assert_array_equal(classes[row], want["classes"])
                assert (classes[row][:num[row]] >= 1).all()
                seen += 1
    assert seen == len(ann)


def test_segmentation_pairs_flow_through_a_pipeline(tmp_path):
    """segmentation_pairs -> Targets.from_annotations (label maps read once) -> the mask
    output is the label map moved by transform_mask with the explain record (pixel
    centres: tests/targets/test_mask_sampling.py checks those against the image)."""
    import cv2
    import fastq
    from fastq import ops as O
    from fastq import targets as T
    rng = np.random.default_rng(10)
    sizes = _write_jpegs(tmp_path, 4, rng)
    os.makedirs(tmp_path / "images", exist_ok=True)
    os.makedirs(tmp_path / "masks", exist_ok=True)
    maps = []
    for k, (h, w) in enumerate(sizes):
        os.replace(tmp_path / "img" / f"{k:03d}.jpg", tmp_path / "images" / f"{k:03d}.jpg")
        m = rng.integers(0, 21, (h, w)).astype(np.uint8)
        cv2.imwrite(str(tmp_path / "masks" / f"{k:03d}.png"), m)
        maps.append(m)
    ann = segmentation_pairs(str(tmp_path))
    targets = T.Targets.from_annotations(ann, mask_fill=255, image_info=False)
    ops = [O.RandomResizedCrop(40), O.HorizontalFlip()]
    with fastq.Pipeline(fastq.sources.Files(ann.keys, targets=targets), batch_size=2, ops=ops, dtype="uint8",
                        seed=1, return_index=True) as p:
        assert [s for s, _ in p.output_spec] == [(40, 40, 3), (40, 40), ()]  # no box outputs
        for images, masks, idx in p:
            for row, i in enumerate(idx.tolist()):
                want = T.transform_mask(p.explain(0, i), maps[i], fill=255)
                np.testing.assert_array_equal(masks[row], want)
    cv2.imwrite(str(tmp_path / "masks" / "001.png"), np.zeros((5, 5, 3), np.uint8))
    with pytest.raises(ValueError, match=r"label map .*001.png.* not one channel"):
        T.Targets.from_annotations(segmentation_pairs(str(tmp_path)))


def test_voc_palette_label_maps_give_their_indices(tmp_path):
    """Pascal VOC's SegmentationClass PNGs are palette images: the class is the palette
    index (255 = the 'void' border), which OpenCV would expand to colours.  read_label_map
    and Targets.from_annotations give the indices written, and a pipeline moves them."""
    from PIL import Image
    import fastq
    from fastq import ops as O
    from fastq import targets as T
    from fastq.annotations.segmentation import read_label_map
    rng = np.random.default_rng(11)
    sizes = _write_jpegs(tmp_path, 3, rng)
    voc = tmp_path / "voc"
    for d in ("JPEGImages", "SegmentationClass", os.path.join("ImageSets", "Segmentation")):
        os.makedirs(voc / d, exist_ok=True)
    palette = [c for i in range(256) for c in ((i * 37) % 256, (i * 91) % 256, (i * 53) % 256)]
    maps, ids = [], []
    for k, (h, w) in enumerate(sizes):
        i = f"2007_{k:06d}"
        os.replace(tmp_path / "img" / f"{k:03d}.jpg", voc / "JPEGImages" / f"{i}.jpg")
        m = rng.integers(0, 21, (h, w)).astype(np.uint8)
        m[0, :] = 255
        im = Image.fromarray(m, "P")
        im.putpalette(palette)
        im.save(voc / "SegmentationClass" / f"{i}.png")
        maps.append(m)
        ids.append(i)
    (voc / "ImageSets" / "Segmentation" / "train.txt").write_text("\n".join(ids) + "\n")
    ann = segmentation_pairs(str(voc), "voc")
    for path, m in zip(ann.mask_keys, maps):
        got = read_label_map(path)
        assert got.dtype == np.uint8 and got.shape == m.shape
        np.testing.assert_array_equal(got, m)
    targets = T.Targets.from_annotations(ann, mask_fill=255, image_info=False)
    with fastq.Pipeline(fastq.sources.Files(ann.keys, targets=targets), batch_size=3, dtype="uint8", seed=2,
                        ops=[O.RandomResizedCrop(32), O.HorizontalFlip()], return_index=True) as p:
        for _images, masks, idx in p:
            for row, i in enumerate(idx.tolist()):
                np.testing.assert_array_equal(masks[row], T.transform_mask(p.explain(0, i), maps[i], fill=255))
    with pytest.raises(ValueError, match=r"label map .*missing.png.* cannot be read"):
        read_label_map(str(tmp_path / "missing.png"))
