"""Frozen golden vectors: "resume reproduces exactly" must hold across versions.

A saved ``state_dict`` (and every experiment log that records a seed) is only
worth something if the same (seed, epoch, index) keys give the same draws in the
next release.  tests/data/golden.json freezes, as recorded values:

* the counter-based RNG (csrc/core/fq_rng.h): raw 64-bit outputs for a few keys;
* the shuffle permutation (``fq_permutation``) for a few (seed, epoch, n);
* ``shard(n, i)`` and the per-epoch sample order of a sharded, shuffled source;
* full ``explain`` records of a fixed op chain on a fixed sample, and the JPEG
  decode plan (DCT scale, ROI) of a fixed-size JPEG.

The values were recorded once from the code, and every one of them that the
RNG alone determines is *also* recomputed here by an independent pure-Python
reimplementation of the generator, the Fisher-Yates shuffle and the random draws
of RandomResizedCrop / flips / ColorJitter / RandomAffine (as documented in
fastq/ops/ and docs/ops.md), so a golden value is not merely fastq's own output.
The one field of the explain record computed from pixels is the ColorJitter op's
``contrast_mean`` (the mean gray of the image the contrast step sees: an exact
multiple of 1/1024 with OpenCV's fixed-point resize).

If a test here fails, a change altered what an existing seed produces.  That
breaks resuming from old checkpoints: do it only on purpose, say so in the
changelog, and update tests/data/golden.json.
"""
import os
import shutil
import subprocess

import numpy as np
import pytest

import fastq
from fastq._native import _image
from fastq import ops

from helpers.golden_ref import GOLDEN, RefRng, _with_tuples, ref_permutation, ref_plan, ref_rrc_box  # noqa: I100


# -- the RNG itself ---------------------------------------------------------------

# (seed, epoch, index) -> first outputs of fq_rng_next_u64
RNG_GOLDEN = {(g["seed"], g["epoch"], g["index"]): g["outputs"] for g in GOLDEN["rng_u64"]}

_RNG_DUMP_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "core/fq_rng.h"
int main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    fq_rng r;
    fq_rng_init(&r, strtoull(argv[1], NULL, 0), strtoull(argv[2], NULL, 0), strtoull(argv[3], NULL, 0));
    for (int i = 0; i < atoi(argv[4]); i++)
        printf("%llu\n", (unsigned long long)fq_rng_next_u64(&r));
    return 0;
}
"""


@pytest.fixture(scope="module")
def rng_dump(tmp_path_factory):
    """A tiny program that prints the C generator's raw outputs (fq_rng.h is
    header-only and not exported by the extension)."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    assert cc, "a C compiler is needed (the same one that builds fastq)"
    d = tmp_path_factory.mktemp("rng")
    src, exe = d / "rngdump.c", d / "rngdump"
    src.write_text(_RNG_DUMP_C)
    csrc = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "csrc")
    subprocess.run([cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I", csrc, str(src), "-o", str(exe)],
                   check=True)

    def run(seed, epoch, index, n):
        out = subprocess.run([str(exe), str(seed), str(epoch), str(index), str(n)], check=True,
                             capture_output=True, text=True).stdout
        return [int(v) for v in out.split()]
    return run


@pytest.mark.parametrize("key", sorted(RNG_GOLDEN))
def test_rng_raw_outputs_are_frozen(rng_dump, key):
    expected = RNG_GOLDEN[key]
    assert rng_dump(*key, len(expected)) == expected
    r = RefRng(*key)
    assert [r.u64() for _ in expected] == expected


def test_reference_rng_matches_c_on_derived_draws(rng_dump):
    # uniform / below are functions of the raw stream; check the reference's
    # derivations on a longer stream so the explain cross-checks below rest on them.
    raw = rng_dump(3, 1, 9, 64)
    r = RefRng(3, 1, 9)
    assert [r.u64() for _ in range(64)] == raw
    r = RefRng(3, 1, 9)
    assert [r.uniform() for _ in range(64)] == [(x >> 11) / 2.0 ** 53 for x in raw]


# -- shuffle and shards -----------------------------------------------------------

# (seed, epoch, n) -> fq_permutation
PERM_GOLDEN = {(g["seed"], g["epoch"], g["n"]): g["perm"] for g in GOLDEN["permutation"]}


@pytest.mark.parametrize("key", sorted(PERM_GOLDEN))
def test_shuffle_permutation_is_frozen(key):
    assert _image.permutation(*key).tolist() == PERM_GOLDEN[key]
    assert ref_permutation(*key) == PERM_GOLDEN[key]


def _tiny_arrays(n):
    return fastq.sources.Arrays([np.full((4, 4, 3), i, np.uint8) for i in range(n)])


def test_shard_assignment_is_frozen():
    src = _tiny_arrays(11)
    golden = GOLDEN["shards_of_11"]
    assert [src.shard(3, i).indices.tolist() for i in range(3)] == golden["3"]
    assert src.shard(1, 0).indices.tolist() == list(range(11))
    assert src.shard(4, 3).shard(2, 1).indices.tolist() == golden["4,3 then 2,1"]


@pytest.mark.parametrize("workers", [1, 2])
def test_sharded_shuffled_epoch_order_is_frozen(workers):
    # shard 2 of 3 of 11 samples = [2, 5, 8]; each epoch shuffles the shard's
    # positions with the (seed, epoch) permutation.
    golden = GOLDEN["sharded_shuffled_epoch_order"]["epochs"]
    src = _tiny_arrays(11).shard(3, 2)
    with fastq.Pipeline(src, batch_size=2, drop_remainder=False, ops=[ops.CenterCrop(2)], seed=5, shuffle=True,
                        return_index=True, workers=workers) as p:
        got = [[int(i) for b in p for i in b[-1]] for _ in range(3)]
    assert got == golden
    assert got == [[[2, 5, 8][k] for k in ref_permutation(5, e, 3)] for e in range(3)]


# -- explain records --------------------------------------------------------------

def _pattern_image(h, w):
    """A fixed image built by integer arithmetic only (no RNG, no codec)."""
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 2 + y) % 256, (y * 3 + 17) % 256, (x * y) % 251], -1).astype(np.uint8)


CHAIN = [ops.RandomResizedCrop(32, scale=(0.2, 1.0)), ops.HorizontalFlip(),
         ops.ColorJitter(0.4, 0.4, 0.4, 0.1),
         ops.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1), shear=5), ops.Normalize()]

# Pipeline(Arrays([_pattern_image(90, 120)] * 8), ops=CHAIN, seed=2024).explain(3, 5)
EXPLAIN_GOLDEN = _with_tuples(GOLDEN["explain"]["record"], set(GOLDEN["explain"]["tuple_paths"]))


@pytest.fixture(scope="module")
def chain_pipeline():
    with fastq.Pipeline(fastq.sources.Arrays([_pattern_image(90, 120)] * 8), batch_size=2, ops=CHAIN,
                        seed=2024) as p:
        yield p


def test_explain_record_is_frozen(chain_pipeline):
    assert chain_pipeline.explain(3, 5) == EXPLAIN_GOLDEN


def _assert_matches_reference(ex, ref):
    rrc, flip, jit, aff = ex["ops"][:4]
    assert rrc["box"] == ref["box"] == ex["crop_src"]
    assert flip["applied"] == ref["hflip"] == ex["hflip"]
    assert jit["order"] == ref["order"]
    for k in ("brightness", "contrast", "saturation", "hue"):
        assert jit[k] == ref[k], k
    assert aff["angle"] == ref["angle"]
    assert aff["translate"] == ref["translate"]
    assert aff["scale"] == ref["scale"]
    assert aff["shear"] == ref["shear"]
    np.testing.assert_allclose(aff["matrix"], ref["matrix"], rtol=0, atol=1e-12)


@pytest.mark.parametrize("epoch,index", [(3, 5), (0, 0), (1, 7), (12, 2)])
def test_explain_draws_match_an_independent_reimplementation(chain_pipeline, epoch, index):
    ex = chain_pipeline.explain(epoch, index)
    ref = ref_plan(2024, epoch, index, 90, 120, (32, 32), (0.2, 1.0), 0.5,
                   [(0.6, 1.4), (0.6, 1.4), (0.6, 1.4), (-0.1, 0.1)], (15.0, (0.1, 0.1), (0.9, 1.1), 5.0))
    _assert_matches_reference(ex, ref)


def test_explain_of_a_sample_does_not_depend_on_its_position_or_shard():
    # the draws are keyed by the dataset index, not by where the sample lands
    src = fastq.sources.Arrays([_pattern_image(90, 120)] * 8)
    with fastq.Pipeline(src.shard(3, 2), batch_size=1, ops=CHAIN, seed=2024, shuffle=True) as p:
        assert p.explain(3, 5) == EXPLAIN_GOLDEN


# The JPEG decode plan of op 0 (DCT scale, ROI in the scaled image) for a fixed-size
# JPEG: a function of the image size and the crop only, not of the pixels.
# Pipeline(Bytes([jpeg 600x800]), ops=[RandomResizedCrop(64, scale=(0.05, 0.3)),
# VerticalFlip(0.5)], seed=77).explain(epoch, index)
JPEG_PLAN_GOLDEN = {(g["epoch"], g["index"]): _with_tuples(g["plan"], set(g["tuple_paths"]))
                    for g in GOLDEN["jpeg_plan"]["plans"]}


def test_jpeg_decode_plan_is_frozen():
    import cv2
    ok, enc = cv2.imencode(".jpg", _pattern_image(600, 800), [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    chain = [ops.RandomResizedCrop(64, scale=(0.05, 0.3)), ops.VerticalFlip(0.5)]
    with fastq.Pipeline(fastq.sources.Bytes([enc.tobytes()] * 4), batch_size=2, ops=chain, seed=77) as p:
        for (epoch, index), want in JPEG_PLAN_GOLDEN.items():
            ex = p.explain(epoch, index)
            assert ex["format"] == "jpeg" and ex["src_shape"] == (600, 800)
            assert {k: ex[k] for k in want} == want, (epoch, index)
            r = RefRng(77, epoch, index)
            assert ex["crop_src"] == ref_rrc_box(r, 600, 800, (0.05, 0.3), (3 / 4, 4 / 3))
            assert ex["vflip"] == (r.uniform() < 0.5)


# Images, boxes, keypoints and image_info through every op with a target rule, frozen as
# SHA-256 digests (recorded before issue 29 moved masks to pixel centres, with the
# build of c74b4fa, and unchanged by it); label maps with mask_sampling="legacy" (also
# recorded with c74b4fa: the old default is kept bit for bit) and at pixel centres
# (frozen since issue 29).  What the values are is checked elsewhere (tests/targets/test_targets.py
# against torchvision, tests/targets/test_mask_sampling.py against TensorFlow and the image).
TARGET_CHAINS = {
    "rrc_flips": [ops.RandomResizedCrop((64, 80), scale=(0.2, 1.0)), ops.HorizontalFlip(), ops.VerticalFlip()],
    "resize": [ops.Resize((50, 70))],
    "resize_up_crop_pad": [ops.Resize((150, 200)), ops.CenterCrop((140, 210)),
                           ops.RandomCrop((120, 180), padding=(5, 7, 3, 9))],
    "rse_pad": [ops.ResizeShortestEdge([64, 80], max_size=120), ops.Pad(size=(128, 128))],
    "scale_jitter": [ops.ScaleJitter((80, 80), scale=(0.3, 2.0))],
    "zoom_out_iou_crop": [ops.RandomZoomOut(side_range=(1.0, 2.5), p=0.7), ops.RandomIoUCrop(), ops.Resize((72, 72))],
    "affine": [ops.RandomAffine(25, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=5)],
    "primitives": [ops.Rotate((-40, 40)), ops.ShearX((-0.3, 0.3)), ops.ShearY(0.2, p=0.5),
                   ops.TranslateX((-20, 20)), ops.TranslateY((-20, 20)), ops.ColorJitter(0.4, 0.4)],
}


def target_digests(masks=None):
    """{chain: sha256 hex} of what 4 samples of each TARGET_CHAINS chain give on fixed
    data: image, boxes, classes, index, keypoints, image_info (masks=None), or the label
    map with mask sampling `masks` ("center", "legacy"; "" calls transform_mask without
    the argument, as the code before issue 29 had to be)."""
    import hashlib
    from fastq import targets as T
    rng = np.random.default_rng(29)
    img = rng.integers(0, 256, (96, 128, 3), dtype=np.uint8)
    lab = rng.integers(0, 200, (96, 128)).astype(np.uint8)
    x0, y0 = rng.uniform(0, 100, 12), rng.uniform(0, 70, 12)
    boxes = np.stack([x0, y0, x0 + rng.uniform(4, 28, 12), y0 + rng.uniform(4, 26, 12)], 1).astype(np.float32)
    kps = np.concatenate([rng.uniform(0, 96, (12, 5, 2)), rng.integers(0, 3, (12, 5, 1))], 2).astype(np.float32)
    out = {}
    for name, chain in TARGET_CHAINS.items():
        spec = _image.ImageSpec(ops.compile_ops(chain, dtype="uint8", input_size=img.shape[:2]))
        h = hashlib.sha256()
        for index in range(4):
            image, ex = spec.process_array(img, 11, 0, index, boxes=boxes)
            if masks is not None:
                h.update(T.transform_mask(ex, lab, fill=255, **({"sampling": masks} if masks else {})).tobytes())
                continue
            r = T.transform_boxes(ex, boxes, np.arange(12), max_boxes=12)
            parts = [image, r["boxes"], r["classes"], r["index"], np.int64([r["num_boxes"], r["truncated"]]),
                     T.transform_keypoints(ex, kps, flip_index=[0, 2, 1, 4, 3])]
            if name not in ("affine", "primitives"):
                parts.append(T.image_info(ex))
            for a in parts:
                h.update(np.ascontiguousarray(a).tobytes())
        out[name] = h.hexdigest()
    return out


def test_images_boxes_keypoints_through_every_target_rule_are_frozen():
    assert target_digests() == GOLDEN["targets"]["images_boxes_keypoints"]


def test_label_maps_through_every_target_rule_are_frozen():
    assert target_digests(masks="center") == GOLDEN["targets"]["label_maps_at_pixel_centres"]
    assert target_digests(masks="legacy") == GOLDEN["targets"]["label_maps_legacy"]
