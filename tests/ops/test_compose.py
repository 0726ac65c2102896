"""Compositions RandomApply / RandomChoice / RandomOrder (csrc/image/api/fq_image_compose.cpp).

The reference is torchvision v2's own containers (transforms.v2.RandomApply / RandomChoice /
RandomOrder): each sample is replayed through them with their random draws (torch.rand,
torch.multinomial, torch.randperm) forced to the choices fastq's explain record reports,
and the children as torchvision v2 functional calls with the parameters fastq drew.  The
draws themselves are checked against the reference generator of tests/image/test_golden.py and
their frequencies with chi-square tests (fixed seeds).
"""
import math
import re

import numpy as np
import pytest

pytestmark = pytest.mark.torch  # torchvision v2 (on torch) is the reference

from helpers import image_ref  # noqa: F401,I100  (puts the repo root on sys.path)
from helpers.determinism import assert_same_for_1_and_2_workers  # noqa: I100
import fastq
from fastq._native import _image
from fastq import ops as O

torch = pytest.importorskip("torch", reason="torch is the reference implementation's runtime")
tvF = pytest.importorskip("torchvision.transforms.v2.functional",
                          reason="torchvision v2 is the independent reference for these ops")
v2 = pytest.importorskip("torchvision.transforms.v2", reason="torchvision v2 holds the reference containers")


def _photo(h=72, w=96):
    import cv2
    from fastq.bench.testdata import source_photos
    img = cv2.cvtColor(cv2.imread(source_photos()[0], cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    return np.ascontiguousarray(cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA))


PHOTO = _photo()
NOISE = np.random.default_rng(3).integers(0, 256, (40, 52, 3), dtype=np.uint8)


def run(chain, img, index, seed=1, dtype="uint8"):
    h, w = img.shape[:2]
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop((h, w)), *chain], dtype=dtype))
    return spec.process_array(img, seed, 0, index)


# ---- the torchvision replay ------------------------------------------------------------

def _leaf(op, rec):
    """op as a torchvision v2 functional call on a CHW uint8 tensor, with fastq's draws."""
    if isinstance(op, O.CenterCrop) or isinstance(op, O.RandomCrop):
        assert not any(rec.get("pad", (0,))), rec
        x, y, w, h = rec["box"]
        return lambda t: tvF.crop(t, y, x, h, w)
    if "applied" in rec and not rec["applied"]:
        return lambda t: t
    m = rec.get("magnitude")
    table = {
        O.Invert: lambda t: tvF.invert(t),
        O.Equalize: lambda t: tvF.equalize(t),
        O.AutoContrast: lambda t: tvF.autocontrast(t),
        O.Posterize: lambda t: tvF.posterize(t, int(m)),
        O.Solarize: lambda t: tvF.solarize(t, m),
        O.Brightness: lambda t: tvF.adjust_brightness(t, m),
        O.HorizontalFlip: lambda t: tvF.horizontal_flip(t),
        O.VerticalFlip: lambda t: tvF.vertical_flip(t),
        O.Rotate: lambda t: tvF.rotate(t, m, fill=0),
    }
    return table[type(op)]


def _build(op, recs, counter):
    """op (a composition: the torchvision v2 container over its children) as a callable;
    counter walks the flat op indices in packing order (depth first)."""
    rec = recs[next(counter)]
    assert rec["op"] == type(op).__name__
    if not isinstance(op, (O.RandomApply, O.RandomChoice, O.RandomOrder)):
        return _leaf(op, rec)
    kids = [_build(c, recs, counter) for c in op.transforms]
    if isinstance(op, O.RandomApply):
        return v2.RandomApply(kids, p=op.p)
    if isinstance(op, O.RandomChoice):
        return v2.RandomChoice(kids, p=list(op.p))
    return v2.RandomOrder(kids)


def _draws(ex):
    """The compositions' draws in the order torchvision makes them: a container draws when
    it runs, then runs its children in order (pre-order over what ran)."""
    out = []

    def walk(i):
        o = ex["ops"][i]
        if "children" not in o:
            return
        if o["op"] == "RandomApply":
            out.append(("rand", o["applied"]))
        elif o["op"] == "RandomChoice":
            out.append(("multinomial", o["chosen"]))
        else:
            out.append(("randperm", o["order"]))
        for c in o["ran"]:
            walk(c)

    for i, o in enumerate(ex["ops"]):
        if "parent" not in o:
            walk(i)
    return out


def torchvision_replay(chain, img, ex, monkeypatch):
    queue = _draws(ex)

    def take(kind):
        assert queue and queue[0][0] == kind, (kind, queue)
        return queue.pop(0)[1]

    monkeypatch.setattr(torch, "rand", lambda *a, **k: torch.tensor([0.0 if take("rand") else 1.0]))
    monkeypatch.setattr(torch, "multinomial", lambda *a, **k: torch.tensor([take("multinomial")]))
    monkeypatch.setattr(torch, "randperm", lambda n, **k: torch.tensor(take("randperm")))
    counter = iter(range(len(ex["ops"])))
    fns = [_build(op, ex["ops"], counter) for op in [O.CenterCrop(img.shape[:2]), *chain]]
    assert next(counter, None) is None
    t = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).contiguous()
    for f in fns:
        t = f(t)
    monkeypatch.undo()
    assert not queue, queue
    return t.permute(1, 2, 0).numpy()


CHAINS = [
    ("apply", [O.RandomApply([O.Invert(), O.HorizontalFlip(1.0), O.Posterize(3)], p=0.5)], True),
    ("apply-p", [O.RandomApply(O.Brightness((0.4, 1.6)), p=0.7), O.RandomApply([O.Equalize()], p=0.0),
                 O.RandomApply([O.VerticalFlip(1.0)], p=1.0)], True),
    ("choice", [O.RandomChoice([O.Equalize(), O.Posterize(2), O.Solarize((0, 256)), O.Brightness((0.5, 1.5))],
                               p=[1, 2, 3, 4])], True),
    ("order", [O.RandomOrder([O.Invert(), O.Posterize(2), O.Brightness((0.3, 1.7)), O.VerticalFlip(0.5),
                              O.Solarize(100)])], True),
    ("nested", [O.RandomOrder([O.RandomApply([O.AutoContrast(), O.HorizontalFlip(1.0)], p=0.6),
                               O.RandomChoice([O.Equalize(), O.Solarize(100), O.RandomApply(O.Invert(), 0.5)]),
                               O.Brightness((0.5, 1.5))]), O.Invert(0.5)], True),
    ("fixed-size-choice", [O.VerticalFlip(0.5), O.RandomChoice([O.CenterCrop((30, 40)), O.RandomCrop((30, 40))]),
                           O.RandomApply([O.HorizontalFlip(1.0), O.Equalize()], p=0.5)], True),
    ("flips-and-rotate", [O.RandomApply([O.HorizontalFlip(1.0)], p=0.5),
                          O.RandomOrder([O.Rotate((-30, 30)), O.VerticalFlip(1.0), O.Invert()])], False),
]


@pytest.mark.parametrize("name,chain,exact", CHAINS, ids=[c[0] for c in CHAINS])
def test_compositions_match_torchvision_containers(name, chain, exact, monkeypatch):
    seen = set()
    for img in (PHOTO, NOISE):
        for index in range(24):
            out, ex = run(chain, img, index)
            want = torchvision_replay(chain, img, ex, monkeypatch)
            assert out.shape == want.shape
            d = np.abs(out.astype(int) - want.astype(int))
            if exact:
                assert d.max() == 0, f"{name}, index {index}: {int((d > 0).sum())} values differ; {ex['ops']}"
            else:  # nearest-neighbour rotation: half-pixel ties (tests/ops/test_aug_ops.py GEOM)
                assert (d.max(axis=-1) > 0).mean() <= 0.005, f"{name}, index {index}"
            seen.add(repr(_draws(ex)))
    assert len(seen) > 1  # the draws vary over the samples


def test_the_order_drawn_is_the_order_run():
    # against running the children in their list order: the drawn order must matter
    chain = [O.RandomOrder([O.Brightness(1.8), O.Posterize(1), O.Invert()])]
    plain = [O.Brightness(1.8), O.Posterize(1), O.Invert()]
    differ = 0
    for index in range(30):
        out, ex = run(chain, PHOTO, index)
        ref, _ = run(plain, PHOTO, 0)
        assert ex["ops"][1]["ran"] == [2 + k for k in ex["ops"][1]["order"]]
        assert ex["exec_order"] == [0] + ex["ops"][1]["ran"]
        if ex["ops"][1]["order"] == [0, 1, 2]:
            assert np.array_equal(out, ref)
        else:
            differ += not np.array_equal(out, ref)
    assert differ > 10


# ---- draws: the reference generator; frequencies ----------------------------------------

def test_draws_follow_the_reference_generator_and_skipped_children_draw_nothing():
    from helpers.golden_ref import RefRng
    chain = [O.RandomApply([O.Invert(0.5), O.Brightness((0.5, 1.5))], p=0.6),
             O.RandomChoice([O.Equalize(0.5), O.Invert(0.5), O.Posterize(3, 0.5)], p=[0.2, 0.3, 0.5]),
             O.RandomOrder([O.Invert(0.5), O.Equalize(0.5), O.AutoContrast(0.5)]), O.Invert(0.5)]
    for index in range(60):
        _, ex = run(chain, NOISE, index, seed=7)
        ops = ex["ops"]
        r = RefRng(7, 0, index)
        applied = r.uniform() < 0.6
        assert ops[1]["applied"] is applied and ops[1]["ran"] == ([2, 3] if applied else [])
        if applied:
            assert ops[2]["applied"] is (r.uniform() < 0.5)
            b_on = r.uniform() < 1.0
            assert ops[3]["magnitude"] == r.uniform_range(0.5, 1.5) and b_on
        else:
            assert ops[2]["skipped"] and ops[3]["skipped"] and not ops[2]["applied"]
            assert ops[3]["magnitude"] == 0.0  # never drawn
        u = r.uniform()
        chosen = 0 if u < 0.2 else (1 if u < 0.2 + 0.3 else 2)
        assert ops[4]["chosen"] == chosen and ops[4]["ran"] == [5 + chosen]
        assert ops[5 + chosen]["applied"] is (r.uniform() < 0.5)
        assert [ops[5 + k]["skipped"] for k in range(3)] == [k != chosen for k in range(3)]
        perm = [0, 1, 2]
        for k in range(2, 0, -1):
            j = r.below(k + 1)
            perm[k], perm[j] = perm[j], perm[k]
        assert ops[8]["order"] == perm
        for k in perm:  # the children draw in the order they run
            assert ops[9 + k]["applied"] is (r.uniform() < 0.5)
        assert ops[12]["applied"] is (r.uniform() < 0.5)


def _chi2(counts, probs):
    n = sum(counts)
    return sum((c - n * p) ** 2 / (n * p) for c, p in zip(counts, probs))


def test_choice_frequencies():
    tiny = NOISE[:4, :4]
    n = 3000
    probs = [0.2, 0.3, 0.5]
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop(4), O.RandomChoice([O.Invert(), O.Equalize(),
                                                                            O.Posterize(3)], p=[2, 3, 5])],
                                          dtype="uint8"))
    counts = [0, 0, 0]
    for i in range(n):
        counts[spec.process_array(tiny, 11, 0, i)[1]["ops"][1]["chosen"]] += 1
    assert _chi2(counts, probs) < 13.82, counts  # chi-square, 2 dof, p = 0.001
    # uniform when p is None
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop(4), O.RandomChoice([O.Invert()] * 4)], dtype="uint8"))
    counts = [0] * 4
    for i in range(n):
        counts[spec.process_array(tiny, 12, 0, i)[1]["ops"][1]["chosen"]] += 1
    assert _chi2(counts, [0.25] * 4) < 16.27, counts  # 3 dof


def test_order_and_apply_frequencies():
    import itertools
    tiny = NOISE[:4, :4]
    n = 3000
    spec = _image.ImageSpec(O.compile_ops([O.CenterCrop(4), O.RandomOrder([O.Invert(), O.Equalize(),
                                                                           O.Posterize(3)]),
                                           O.RandomApply(O.Invert(), p=0.3)], dtype="uint8"))
    perms = {p: 0 for p in itertools.permutations(range(3))}
    hits = 0
    for i in range(n):
        ops = spec.process_array(tiny, 13, 0, i)[1]["ops"]
        perms[tuple(ops[1]["order"])] += 1
        hits += ops[5]["applied"]
    assert _chi2(list(perms.values()), [1 / 6] * 6) < 20.52, perms  # 5 dof, p = 0.001
    assert abs(hits - 0.3 * n) <= 4 * math.sqrt(n * 0.3 * 0.7), hits


# ---- pipeline, JPEG path -----------------------------------------------------------------

def test_one_and_two_workers_are_bit_identical():
    imgs = [np.ascontiguousarray(np.roll(PHOTO, 7 * k, axis=1)[:64, :80]) for k in range(12)]
    chain = [O.RandomChoice([O.RandomResizedCrop(48), O.CenterCrop(48), O.RandomCrop(48)], p=[3, 1, 1]),
             O.RandomApply([O.HorizontalFlip(), O.Rotate((-20, 20)), O.Equalize(0.5)], p=0.5),
             O.RandomOrder([O.Brightness((0.5, 1.5)), O.RandomChoice([O.Posterize(3), O.Solarize((0, 256))]),
                            O.VerticalFlip()]), O.TrivialAugmentWide()]
    assert_same_for_1_and_2_workers(imgs, chain, shape=(12, 48, 48, 3))


def test_a_composition_as_op_0_decodes_the_whole_jpeg():
    import cv2
    ok, enc = cv2.imencode(".jpg", cv2.cvtColor(PHOTO, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 90])
    data = enc.tobytes()
    H, W = PHOTO.shape[:2]
    full, _ = _image.ImageSpec(O.compile_ops([O.CenterCrop((H, W))], dtype="uint8")).process_encoded(data)
    chain = [O.RandomChoice([O.RandomResizedCrop(40), O.CenterCrop(40)]), O.RandomApply(O.HorizontalFlip(1.0))]
    spec = _image.ImageSpec(O.compile_ops(chain, dtype="uint8"))
    for index in range(8):
        dp = spec.plan_decode(H, W, 1, 0, index)
        assert dp["first_op"] == "RandomChoice" and not dp["box_op"] and not dp["resize_after"]
        assert dp["scale"] == (8, 8) and not dp["roi_used"]
        out, ex = spec.process_encoded(data, 1, 0, index)
        assert ex["decode_scale"] == (8, 8) and ex["crop_src"] is None and not ex["roi_used"]
        ref, ex2 = spec.process_array(full, 1, 0, index)
        assert np.array_equal(out, ref) and ex2["ops"] == ex["ops"]
        assert ex["hflip"] == ex["ops"][3]["applied"]


# ---- validation, repr ----------------------------------------------------------------------

BAD_SPECS = [
    ([O.CenterCrop(8), O.RandomApply([O.CenterCrop(4)])],
     r"op 2 \(CenterCrop\) inside op 1 \(RandomApply\): changes the image size"),
    ([O.CenterCrop(8), O.RandomOrder([O.Invert(), O.Resize(shorter_side=4)])],
     r"op 3 \(Resize\) inside op 1 \(RandomOrder\): changes the image size"),
    ([O.CenterCrop(8), O.RandomChoice([O.CenterCrop(4), O.CenterCrop((4, 5))])],
     r"op 3 \(CenterCrop\) inside op 1 \(RandomChoice\): gives 5x4 but op 2 gives 4x4"),
    ([O.CenterCrop(8), O.RandomChoice([O.Invert(), O.CenterCrop(4)])],
     r"op 3 \(CenterCrop\) inside op 1 \(RandomChoice\): gives a fixed size but op 2 gives the input size"),
    ([O.CenterCrop(8), O.RandomChoice([O.Resize(shorter_side=4), O.Resize(shorter_side=4)])],
     r"op 2 \(Resize\) inside op 1 \(RandomChoice\): changes the image size by the input size"),
    ([O.CenterCrop(8), O.RandomApply([O.RandomOrder([O.Invert(), O.RandomCrop(4)])])],
     r"op 4 \(RandomCrop\) inside op 2 \(RandomOrder\)"),
    ([O.CenterCrop(8)] + [O.RandomOrder([O.Invert()] * 14)] * 2, r"0\.\.16 ops \(each op inside a composition"),
]


@pytest.mark.parametrize("chain,msg", BAD_SPECS, ids=[m[:40] for _, m in BAD_SPECS])
def test_bad_specs_name_the_op_and_reason(chain, msg):
    with pytest.raises(ValueError, match=msg):
        O.compile_ops(chain)


@pytest.mark.parametrize("make,msg", [
    (lambda: O.RandomApply([]), "RandomApply: transforms must not be empty"),
    (lambda: O.RandomChoice([]), "RandomChoice: transforms must not be empty"),
    (lambda: O.RandomOrder([]), "RandomOrder: transforms must not be empty"),
    (lambda: O.RandomApply([O.Invert()], p=1.5), "RandomApply: p must be a probability"),
    (lambda: O.RandomApply([O.Invert()], p=float("nan")), "RandomApply: p must be a probability"),
    (lambda: O.RandomChoice([O.Invert()], p=[1, 2]), r"RandomChoice: p must have one probability per op \(1\)"),
    (lambda: O.RandomChoice([O.Invert(), O.Equalize()], p=[0, 0]), "RandomChoice: p must be finite numbers >= 0"),
    (lambda: O.RandomChoice([O.Invert(), O.Equalize()], p=[-1, 2]), "RandomChoice: p must be finite numbers >= 0"),
    (lambda: O.RandomChoice([O.Invert()], p=0.5), "RandomChoice: p must be None or a list"),
    (lambda: O.RandomOrder([O.Normalize()]), "RandomOrder: transforms.0.: Normalize cannot be inside"),
    (lambda: O.RandomOrder(O.Invert()), "RandomOrder: transforms must be a list"),
    (lambda: O.RandomOrder([O.Invert(), "x"]), r"RandomOrder: transforms\[1\] is not a fastq.ops op"),
    (lambda: O.RandomChoice([O.Invert()] * 16), "RandomChoice: at most 15 child ops"),
    (lambda: O.RandomApply([O.RandomOrder([O.Invert()] * 8)] * 2), "RandomApply: at most 15 child ops"),
])
def test_bad_compositions_raise_naming_the_op(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()


def test_the_c_core_refuses_bad_packed_compositions():
    ka, kc, ko, ki = O.RandomApply.kind, O.RandomChoice.kind, O.RandomOrder.kind, O.Invert.kind
    crop = (O.K_CENTER_CROP, {"out_h": 4, "out_w": 4})
    inv = (ki, {"p": 1.0})
    zeros = [0.0] * 15
    for rows, msg in [
        ([crop, (ka, {"n": 3, "p": 0.5}), inv], "op 1 (RandomApply): its 3 child ops run past the end"),
        ([crop, (ka, {"n": 0, "p": 0.5}), inv], "op 1 (RandomApply): the number of child ops must be"),
        ([crop, (ka, {"n": 1.5, "p": 0.5}), inv], "op 1 (RandomApply): the number of child ops must be"),
        ([crop, (ka, {"n": 1, "p": 2.0}), inv], "op 1 (RandomApply): p must be in [0, 1]"),
        ([crop, (kc, {"n": 1, "p": [0.5] + zeros[1:]}), inv], "op 1 (RandomChoice): p must sum to 1"),
        ([crop, (kc, {"n": 1, "p": [1.0, 0.5] + zeros[2:]}), inv], "op 1 (RandomChoice): p must be n probab"),
        ([crop, (ko, {"n": 1}), (O.K_NORMALIZE, O.Normalize().fields())], "Normalize cannot be inside"),
    ]:
        err = _image.check_chain(_image.pack_ops(rows), "float32")["error"]
        assert err is not None and msg in err, (msg, err)


def test_repr_eq_and_packing():
    a = O.RandomApply([O.Invert(), O.RandomChoice([O.Equalize(), O.Posterize(3)], p=[1, 3])], p=0.25)
    assert repr(a) == ("RandomApply([Invert(p=1.0), RandomChoice([Equalize(p=1.0), Posterize(bits=3, p=1.0)], "
                       "p=[0.25, 0.75])], p=0.25)")
    assert repr(O.RandomOrder([O.Invert()])) == "RandomOrder([Invert(p=1.0)])"
    assert a == O.RandomApply([O.Invert(), O.RandomChoice([O.Equalize(), O.Posterize(3)], p=[2, 6])], p=0.25)
    assert a != O.RandomApply([O.Invert(), O.RandomChoice([O.Equalize(), O.Posterize(3)])], p=0.25)
    assert len({a, a}) == 1
    c = O.compile_ops([O.CenterCrop(4), a], dtype="uint8")
    assert [int(k) for k in c.packed_ops["kind"]] == [O.K_CENTER_CROP, a.kind, O.Invert.kind, O.RandomChoice.kind,
                                                      O.Equalize.kind, O.Posterize.kind]
    assert c.packed_ops["f"][1][:2].tolist() == [2, 0.25] and c.packed_ops["f"][3][:3].tolist() == [2, 0.25, 0.75]


# ---- fastq show -----------------------------------------------------------------------------

def test_show_labels_name_the_ops_that_ran(tmp_path):
    from fastq.bench import testdata
    from fastq.cli.show import applied_ops, parse_ops, render_contact_sheet
    paths = testdata.make_jpeg_dataset(str(tmp_path), 6, seed=2, min_side=120, max_side=200)
    text = ("CenterCrop(96),RandomApply([Invert(), HorizontalFlip(1.0)], p=0.5),"
            "RandomChoice([Equalize(), Posterize(3)]),RandAugment(2),Brightness(1.2, p=0.5)")
    chain = parse_ops(text)
    assert chain[1] == O.RandomApply([O.Invert(), O.HorizontalFlip(1.0)], p=0.5)
    _, cells = render_contact_sheet(paths, range(6), chain, seed=4)
    seen_apply = set()
    for cell in cells:
        ex = cell["explain"]
        ops = ex["ops"]
        want = ["CenterCrop"]
        if ops[1]["applied"]:
            want += ["Invert", "HorizontalFlip"]
        seen_apply.add(ops[1]["applied"])
        want.append(["Equalize", "Posterize"][ops[4]["chosen"]])
        want.append("RandAugment[" + ", ".join(p["op"] for p in ops[7]["policy"]) + "]")
        if ops[8]["applied"]:
            want.append("Brightness")
        assert applied_ops(ex) == want
        label = re.sub(r"\s+", " ", " ".join(cell["label"]))
        assert "ran: " + ", ".join(want) in label, (label, want)
    assert seen_apply == {True, False}
