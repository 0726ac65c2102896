"""The mutated decoder corpus (tests/helpers/fuzz_corpus.py) through the dense-target
features: RandomIoUCrop (drawn from the boxes), instance masks (polygons, at the output
size or M x M in the box; bitmaps with a semantic mask) and Pipeline(pad="batch"), with
both error policies.

For every configuration:
  * on_error="raise" (batch 1, resumed past each failure): every sample's outcome (all
    outputs, or error class and message) is the same for 1 and 2 workers and in another
    visiting order, every error names its sample and file, and the corpus gives both
    outcomes;
  * the good samples' outputs equal those of the same samples (same indices) in a corpus
    whose bad files are replaced by a clean one, batched by 4: nothing depends on what a
    worker decoded before or on the neighbours in the batch (pad="batch": the valid region
    given by image_sizes, the fill outside it);
  * the targets agree with the image kept: boxes and classes equal transform_boxes of the
    sample's explain record (which re-decodes the file), slots after num_boxes are empty,
    image_sizes is the explain record's output size, the rectangle polygons' masks span
    their boxes, nothing of a mask lies outside its image;
  * on_error="raise" with batches of 4: each batch either comes out whole or raises the
    error of its lowest bad sample (the one the batch-1 run gave);
  * on_error="skip": every position of the epoch is filled, the skips are counted once per
    bad sample with the reasons of the raise run, 1 and 2 workers give bit-identical
    batches, and each row is the batch-1 output of the sample named by its index.

Found by it: full-size polygon instance masks had pixels in the padding (outside
image_sizes) when the polygon reached past a RandomIoUCrop: the moved vertices are not
clipped, and the part a crop cut off came back in the fill of a later pad.  Polygon masks
are now kept where the image shows the source (csrc/image/targets/fq_image_targets_inst.cpp,
fq_tgt_valid); the last test pins it on a crop followed by Pad / RandomZoomOut.

Measured on the development machine (2 shared cores): ~5 s for the module.
"""
import numpy as np
import pytest

from helpers import fuzz_corpus as F  # noqa: I100  (puts the repo root on sys.path)
import fastq
from fastq import errors as E
from fastq import ops as O
from fastq import targets as T

H, W = 64, 80  # the size of every seed of the corpus (fuzz_corpus._photo)
MAX_BOXES = 4
REASONS = {"DecodeError": "FQ_E_DECODE", "UnsupportedFormatError": "FQ_E_UNSUPPORTED",
           "InvalidArgumentError": "FQ_E_INVALID", "ImageTooLargeError": "FQ_E_TOO_LARGE",
           "EmptyImageError": "FQ_E_EMPTY"}


def _targets(paths, seed):
    """Per sample 1..3 boxes in the seeds' frame (some reach past the smaller sizes that
    mutated frame headers give; every 9th sample has none), the rectangle polygon of each
    box, bitmaps of them (at the seeds' size) and a semantic mask.  The files whose frame
    size was changed (fuzz_corpus.mutants kind 3: names ending in -3) get one box near the
    origin, so that those which decode keep their boxes and polygons, and their bitmaps /
    mask of another size than the image fail the sample."""
    rng = np.random.default_rng(seed)
    boxes = []
    for p in paths:
        k = int(rng.integers(1, 4))
        x0, y0 = rng.uniform(0, W - 24, k), rng.uniform(0, H - 20, k)
        b = np.stack([x0, y0, x0 + rng.uniform(6, 24, k), y0 + rng.uniform(6, 20, k)], 1).astype(np.float32)
        if p.endswith("-3.img"):
            b = np.array([[1.5, 1, 5, 4.5]], np.float32)
        boxes.append(b if len(boxes) % 9 != 4 else np.zeros((0, 4), np.float32))  # some without objects
    rects = [[[np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)] for x0, y0, x1, y1 in b]
             for b in boxes]
    bitmaps = []
    for b in boxes:
        m = np.zeros((len(b), H, W), np.uint8)
        for j, (x0, y0, x1, y1) in enumerate(b):
            m[j, int(np.ceil(y0)):int(y1), int(np.ceil(x0)):int(x1)] = 1
        bitmaps.append(m)
    semantic = [(np.arange(H * W).reshape(H, W) * (i + 1) % 7).astype(np.uint8) for i in range(len(paths))]
    return boxes, rects, bitmaps, semantic


def _rse():
    return O.ResizeShortestEdge([24, 32], max_size=48)


# name: (ops, Targets keywords (from _targets), Pipeline keywords)
CONFIGS = {
    "iou_crop": ([O.RandomIoUCrop(), O.Resize((32, 32))], dict(image_info=False), {}),
    "iou_crop_polygons_pad": ([O.RandomIoUCrop(), _rse(), O.HorizontalFlip()],
                              dict(image_info=True, instance_polygons="rects"),
                              dict(pad="batch", pad_multiple=8)),
    "polygons_in_box": ([O.HorizontalFlip(), O.RandomResizedCrop((32, 40), scale=(0.3, 1.0))],
                        dict(image_info=False, instance_polygons="rects", instance_mask_size=(12, 12)), {}),
    "bitmaps_masks_pad": ([_rse(), O.VerticalFlip()],
                          dict(image_info=False, instance_masks="bitmaps", masks="semantic", mask_fill=255),
                          dict(pad="batch")),
}
# outputs holding image planes: cropped to image_sizes under pad="batch" (fill outside)
PLANES = {"images": 0, "masks": 255, "instance_masks": 0}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz_dense")
    paths = F.write(F.mutants(seed=4, per_seed=4), str(d))
    return paths, _targets(paths, seed=9)


def _source(paths, tg_data, tkw):
    boxes, rects, bitmaps, semantic = tg_data
    kw = dict(tkw)
    for key, value in (("instance_polygons", rects), ("instance_masks", bitmaps), ("masks", semantic)):
        if kw.get(key) is not None:
            kw[key] = value
    tg = T.Targets(boxes, [np.arange(len(b)) + 1 for b in boxes], max_boxes=MAX_BOXES, **kw)
    return fastq.sources.Files(paths, targets=tg)


def _pipe(paths, tg_data, name, *, batch_size, workers, shuffle=False, **kw):
    ops, tkw, pkw = CONFIGS[name]
    return fastq.Pipeline(_source(paths, tg_data, tkw), batch_size=batch_size, workers=workers, ops=ops,
                          dtype="uint8", seed=7, shuffle=shuffle, return_index=True, stall_timeout=60,
                          queue_size=4, **pkw, **kw)


def _rows(pipe, batch):
    """[(index, {output name: row})] of one batch; under pad="batch" the image planes are
    cut to the row's image_sizes after checking that the padding holds the fill."""
    names = pipe.output_names
    b = {k: np.array(v) for k, v in zip(names, batch)}
    out = []
    for r, idx in enumerate(b["index"]):
        row = {k: v[r] for k, v in b.items() if k != "index"}
        if "image_sizes" in row:
            h, w = (int(v) for v in row["image_sizes"])
            for k, fill in PLANES.items():
                if k in row and not (k == "instance_masks" and row[k].shape[-2:] == (12, 12)):
                    a = row[k] if k != "images" else np.moveaxis(row[k], -1, 0)  # HWC -> CHW
                    assert np.all(a[..., h:, :] == fill) and np.all(a[..., :, w:] == fill), (idx, k)
                    a = a[..., :h, :w]
                    row[k] = np.ascontiguousarray(a if k != "images" else np.moveaxis(a, 0, -1))
        out.append((int(idx), row))
    return out


def _same(a, b):
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a)


def run_raise(paths, tg_data, name, workers, shuffle=False):
    """Batch 1, on_error="raise", resumed past each failure:
    {index: ("ok", rows) | ("error", class name, message, index, path)}."""
    p = _pipe(paths, tg_data, name, batch_size=1, workers=workers, shuffle=shuffle)
    out, pos = {}, 0
    try:
        while pos < len(paths):
            p.load_state_dict({"epoch": 0, "position": pos})
            try:
                for b in p:
                    ((idx, row),) = _rows(p, b)
                    out[idx] = ("ok", row)
                    pos += 1
            except E.FastqError as e:
                out[e.index] = ("error", type(e).__name__, str(e), e.index, e.path)
                pos += 1
    finally:
        p.close()
    assert sorted(out) == list(range(len(paths)))
    return out


def _key(o):
    return repr(o) if o[0] == "error" else ("ok", {k: v.tobytes() for k, v in o[1].items()})


@pytest.fixture(scope="module")
def raised(corpus):
    """Per configuration: the batch-1 raise runs with 1 and 2 workers and 2 shuffled."""
    paths, tg = corpus
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = [run_raise(paths, tg, name, 1), run_raise(paths, tg, name, 2),
                           run_raise(paths, tg, name, 2, shuffle=True)]
        return cache[name]
    return get


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_raise_same_outcome_for_1_and_2_workers_and_order_and_named_errors(corpus, raised, name):
    paths, _ = corpus
    runs = raised(name)
    nondet = [i for i in range(len(paths)) if len({repr(_key(r[i])) for r in runs}) > 1]
    assert nondet == [], f"{len(nondet)} of {len(paths)} samples depend on the run: {nondet[:5]}"
    n_err = 0
    for i, p in enumerate(paths):
        o = runs[0][i]
        if o[0] == "error":
            n_err += 1
            assert o[3] == i and o[4] == p and f"sample {i}" in o[2] and p in o[2], o
            assert o[1] in REASONS, o
    assert 0 < n_err < len(paths) - 8  # both outcomes, with enough good samples to compare


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_good_samples_equal_a_clean_corpus_batched_by_4(corpus, raised, name, tmp_path):
    """The bad files replaced by a clean seed (so the good samples keep their indices):
    the good samples' outputs are the batch-1 outputs of the fuzzed run, whatever the
    workers decoded before and whatever else is in the batch."""
    paths, tg = corpus
    one = raised(name)[0]
    clean_file = paths[0]  # the first seed, unmutated
    assert "-m" not in clean_file and one[0][0] == "ok"
    clean = [p if one[i][0] == "ok" else clean_file for i, p in enumerate(paths)]
    with _pipe(clean, tg, name, batch_size=4, workers=2, shuffle=True, drop_remainder=False) as p:
        got = [r for b in p for r in _rows(p, b)]
        assert p.stats()["skipped"] == 0
    assert sorted(i for i, _ in got) == list(range(len(paths)))
    compared = 0
    for i, row in got:
        if one[i][0] == "ok":
            assert _same(row, one[i][1]), (name, i, paths[i])
            compared += 1
    assert compared > 8


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_targets_agree_with_the_image_kept(corpus, raised, name):
    """Boxes / classes / num_boxes == transform_boxes(explain) (explain re-decodes the file,
    so a mutated frame size is the one the worker saw); image_sizes and image_info follow
    that record; the slots after the count are empty; a rectangle polygon's mask spans its
    box (1 px); bitmaps' masks lie inside their boxes."""
    paths, tg = corpus
    boxes = tg[0]
    one = raised(name)[0]
    _, tkw, pkw = CONFIGS[name]
    with _pipe(paths, tg, name, batch_size=1, workers=1) as p:
        for i, o in one.items():
            if o[0] != "ok":
                if o[1] == "InvalidArgumentError":  # the image decodes, its targets do not fit it
                    assert o[2].startswith(f"sample {i}: targets: "), o
                    p.explain(0, i)
                else:
                    with pytest.raises(getattr(E, o[1]), match=f"sample {i}"):
                        p.explain(0, i)
                continue
            row = o[1]
            ex = p.explain(0, i)
            oh, ow = ex["out_shape"][:2]
            if pkw.get("pad"):  # the pipeline's own Pad to the chain's bound, after the chain
                assert ex["ops"][-1]["op"] == "Pad"
                oh, ow = ex["ops"][-1]["in_shape"][:2]
                assert tuple(row["image_sizes"]) == (oh, ow)
            assert row["images"].shape[:2] == (oh, ow)
            want = T.transform_boxes(ex, boxes[i], np.arange(len(boxes[i])) + 1, max_boxes=MAX_BOXES)
            n = want["num_boxes"]
            assert int(row["num_boxes"]) == n
            np.testing.assert_array_equal(row["boxes"], want["boxes"])
            np.testing.assert_array_equal(row["classes"], want["classes"])
            assert np.all(row["boxes"][n:] == 0) and np.all(row["classes"][n:] == -1)
            assert np.all(row["boxes"][:n, 2:] <= [ow, oh]) and np.all(row["boxes"][:n] >= 0)
            if tkw.get("image_info"):
                info = row["image_info"]
                np.testing.assert_array_equal(info[0], ex["src_shape"])  # the decoded size
                np.testing.assert_array_equal(info, T.image_info(ex))
            if "instance_masks" not in row:
                continue
            im = row["instance_masks"]
            assert not im[n:].any()
            for k in range(n):
                if tkw.get("instance_mask_size"):
                    assert im[k].any() or (want["boxes"][k, 2:] - want["boxes"][k, :2]).min() < 1
                    continue
                ys, xs = np.nonzero(im[k])
                bx = row["boxes"][k]
                if len(ys) == 0:  # a sliver thinner than a pixel centre
                    assert (bx[2:] - bx[:2]).min() < 2, (i, k, bx)
                    continue
                tol = 1.0 if tkw.get("instance_polygons") else 1.5
                got = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], np.float32)
                assert np.all(np.abs(got - bx) <= tol), (name, i, k, got, bx)


def _first_batches_raise(paths, tg, name, workers):
    """Batches of 4 with on_error="raise", resumed at the next batch after each failure:
    {batch: ("ok", rows) | ("error", index, message)}."""
    out = {}
    n_batches = len(paths) // 4
    with _pipe(paths, tg, name, batch_size=4, workers=workers) as p:
        pos = 0
        while pos < n_batches:
            p.load_state_dict({"epoch": 0, "position": pos})
            try:
                for b in p:
                    out[pos] = ("ok", _rows(p, b))
                    pos += 1
            except E.FastqError as e:
                out[pos] = ("error", e.index, str(e))
                pos += 1
    return out


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_raise_in_batches_of_4_names_the_lowest_bad_sample(corpus, raised, name):
    paths, tg = corpus
    one = raised(name)[0]
    bad = {i for i, o in one.items() if o[0] == "error"}
    runs = [_first_batches_raise(paths, tg, name, w) for w in (1, 2)]
    for b in range(len(paths) // 4):
        members = range(4 * b, 4 * b + 4)
        worst = [i for i in members if i in bad]
        for r in runs:
            o = r[b]
            if worst:
                assert o[0] == "error" and o[1] == worst[0] and o[2] == one[worst[0]][2], (b, o)
            else:
                assert o[0] == "ok" and [i for i, _ in o[1]] == list(members)
                for i, row in o[1]:
                    assert _same(row, one[i][1]), (name, i)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_skip_fills_the_epoch_counts_each_bad_sample_and_is_worker_independent(corpus, raised, name):
    paths, tg = corpus
    one = raised(name)[0]
    errors = [o for o in one.values() if o[0] == "error"]
    want_reasons = {}
    for o in errors:
        want_reasons[REASONS[o[1]]] = want_reasons.get(REASONS[o[1]], 0) + 1
    runs = []
    for workers in (1, 2):
        with _pipe(paths, tg, name, batch_size=4, workers=workers, on_error="skip", drop_remainder=False) as p:
            batches = [[np.array(x) for x in b] for b in p]
            rows = [r for b in batches for r in _rows(p, b)]
            st = p.stats()
        runs.append(batches)
        assert len(rows) == len(paths)  # every position filled
        assert st["skipped"] == len(errors)
        assert {k: v for k, v in st["skipped_by_reason"].items() if v} == want_reasons
        for pos, (i, row) in enumerate(rows):
            assert one[i][0] == "ok", (pos, i)  # a replacement is a good sample...
            assert _same(row, one[i][1]), (name, pos, i)  # ...with its own outputs
            if one[pos][0] == "ok":
                assert i == pos  # good samples are not replaced
    assert len(runs[0]) == len(runs[1])
    for a, b in zip(*runs):
        assert len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("pad_op", [O.Pad(size=(32, 32)), O.RandomZoomOut(side_range=(1.6, 1.6), p=1.0)])
def test_a_polygon_cut_by_a_crop_stays_out_of_the_padding(pad_op):
    """Regression (found by iou_crop_polygons_pad above: instance mask pixels outside
    image_sizes): the moved vertices were rasterized at the padded output size, so the part
    of a polygon that a crop had cut off came back in a later Pad / RandomZoomOut's fill.
    A polygon covering the whole 40x50 image, CenterCrop((20, 24)), then padding: the mask
    is exactly the crop's 20x24 pixels where the image shows them, 0 in the fill."""
    img = np.full((40, 50, 3), 200, np.uint8)
    ring = np.array([[0, 0], [50, 0], [50, 40], [0, 40]], np.float32)
    tg = T.Targets([[[0, 0, 50, 40]]], max_boxes=1, image_info=False, instance_polygons=[[[ring]]])
    ops = [O.CenterCrop((20, 24)), pad_op] + ([] if isinstance(pad_op, O.Pad) else [O.Pad(size=(32, 40))])
    with fastq.Pipeline(fastq.sources.Arrays([img], targets=tg), batch_size=1, ops=ops, dtype="uint8",
                        seed=1) as p:
        out = dict(zip(p.output_names, next(iter(p))))
        ex = p.explain(0, 0)
    image, mask = out["images"][0], out["instance_masks"][0, 0]
    shows = np.all(image == 200, axis=-1)
    assert shows.sum() == 20 * 24 and not image[~shows].any()  # the crop, somewhere; fill 0 around it
    np.testing.assert_array_equal(mask, shows.astype(np.uint8))
    np.testing.assert_array_equal(T.transform_polygons(ex, [ring]), mask)
    ys, xs = np.nonzero(mask)
    np.testing.assert_array_equal(out["boxes"][0, 0], [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
