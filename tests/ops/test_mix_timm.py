"""timm's MixUp / CutMix options in fastq.MixUpCutMix: ``cutmix_minmax``, ``correct_lam``
and ``mode="pair"`` (csrc/image/batch/fq_batch_mix.cpp).

The reference is timm's own ``Mixup`` (timm/data/mixup.py) run on the batch taken from
a pipeline without ``mix``, with its ``np.random`` replaced by a script that returns
fastq's draws (``Pipeline.explain_batch``): the apply and switch decisions, the Beta
lambda, and the four ``randint`` values of ``rand_bbox_minmax`` (each checked to lie in
the range timm asks for).  For a Beta-lambda CutMix box, fastq follows torchvision's box
(tests/ops/test_mix.py checks it against torchvision), so timm's ``rand_bbox`` is replaced by
fastq's box and timm's ``cutmix_bbox_and_lam`` does the lambda correction or not.
The same checks without timm (numpy replays) run where timm is not installed."""
import types

import numpy as np
import pytest

import fastq
import fastq.ops as fops

N, H, W, K = 40, 12, 10, 5


def _data(n=N, seed=0):
    rs = np.random.RandomState(seed)
    return rs.randint(0, 256, (n, H, W, 3), dtype=np.uint8), rs.randint(0, K, n).astype(np.int64)


def _pipes(mix, *, n=N, batch_size=8, workers=2, layout="NCHW", seed=3, drop_remainder=True):
    imgs, labels = _data(n)
    kw = dict(batch_size=batch_size, workers=workers, dtype="float32", layout=layout, seed=seed, shuffle=True,
              drop_remainder=drop_remainder, ops=[fops.HorizontalFlip()])
    return (fastq.Pipeline(fastq.sources.Arrays(imgs, labels), **kw),
            fastq.Pipeline(fastq.sources.Arrays(imgs, labels), mix=mix, **kw))


def _epoch(pipe):
    return [tuple(np.array(a) for a in b) for b in pipe]


def _nchw(x, layout):
    return x if layout == "NCHW" else x.transpose(0, 3, 1, 2)


def _smooth(labels, s):
    off = s / K
    return np.where(np.eye(K, dtype=bool)[labels], 1.0 - s + off, off)


# ---- timm with fastq's draws ---------------------------------------------------------

class _ScriptedNumpy:
    """Stands in for timm.data.mixup's ``np``: ``np.random`` answers from queues of
    fastq's draws; everything else is numpy."""

    def __init__(self, rand, beta, randint):
        self._rand, self._beta, self._randint = list(rand), list(beta), list(randint)
        self.random = types.SimpleNamespace(rand=self._next_rand, beta=self._next_beta, randint=self._next_randint)

    def __getattr__(self, name):
        return getattr(np, name)

    def _next_rand(self, size=None):
        v = self._rand.pop(0)
        assert size is None or len(v) == size
        return v

    def _next_beta(self, a, b, size=None):
        v = self._beta[0] if size is not None else self._beta.pop(0)  # elem/pair: two calls, same lambdas
        assert size is None or len(v) == size
        return v

    def _next_randint(self, low, high, size=None):
        v = self._randint.pop(0)
        assert low <= v < high, (low, v, high)  # fastq's value lies in timm's range
        return v

    def done(self):
        assert not self._rand and not self._randint


def _script(mix, draws, per_elem):
    """The np.random answers of timm's _params_per_batch (one draw) or
    _params_per_elem (a list of draws), and the boxes (Beta boxes: for rand_bbox)."""
    both = mix.mixup_alpha > 0 and mix.cutmix_alpha > 0
    applied = [d["mode"] is not None for d in draws]
    cut = [d["mode"] == "cutmix" for d in draws]
    lams = [0.5 if d["lam_drawn"] is None else d["lam_drawn"] for d in draws]
    minmax, boxes = [], []
    for d in draws:
        if d["mode"] == "cutmix":
            x0, y0, x1, y1 = d["box"]
            minmax += [y1 - y0, x1 - x0, y0, x0]  # rand_bbox_minmax: cut_h, cut_w, yl, xl
            boxes.append((np.int64(y0), np.int64(y1), np.int64(x0), np.int64(x1)))
    if per_elem:
        rand = ([np.where(cut, 0.0, 1.0)] if both else []) + [np.where(applied, 0.0, 1.0)]
        beta = [np.array(lams)]
    else:
        rand = [0.0 if applied[0] else 1.0] + ([0.0 if cut[0] else 1.0] if both and applied[0] else [])
        beta = lams[:1] if applied[0] else []
    return rand, beta, (minmax if mix.cutmix_minmax is not None else []), boxes


def _timm_mix(monkeypatch, mix, x_nchw, labels, draws, mode):
    tm = pytest.importorskip("timm.data.mixup", reason="the reference is timm's Mixup (pip install timm)")
    import torch
    rand, beta, randint, boxes = _script(mix, draws, mode != "batch")
    fake = _ScriptedNumpy(rand, beta, randint)
    monkeypatch.setattr(tm, "np", fake)
    monkeypatch.setattr(tm, "rand_bbox", lambda img_shape, lam, margin=0.0, count=None: boxes.pop(0))
    ref = tm.Mixup(mixup_alpha=mix.mixup_alpha, cutmix_alpha=mix.cutmix_alpha, cutmix_minmax=mix.cutmix_minmax,
                   prob=mix.prob, switch_prob=mix.switch_prob, mode=mode, correct_lam=mix.correct_lam,
                   label_smoothing=mix.label_smoothing, num_classes=K)
    ox, oy = ref(torch.from_numpy(np.ascontiguousarray(x_nchw)), torch.from_numpy(labels))
    fake.done()
    assert mix.cutmix_minmax is not None or not boxes
    monkeypatch.undo()
    return ox.numpy(), oy.numpy()


def _check_against_timm(monkeypatch, plain, mixed, epoch):
    """Every batch of the epoch equals timm's Mixup with the same draws: mode pair as
    one timm call on the whole batch; modes batch and elem row by row (timm's flip of
    [row, partner] is fastq's partner), as timm's batch mode with that row's draw."""
    mix, layout = mixed.mix, mixed._mix.layout
    kinds = set()
    for b, ((x, y), (gx, gy)) in enumerate(zip(_epoch(plain), _epoch(mixed))):
        ex = mixed.explain_batch(epoch, b)
        x, gx = _nchw(x, layout), _nchw(gx, layout)
        np.testing.assert_allclose(gy.sum(1), 1.0, atol=1e-6)
        n = len(y)
        draws = ex["draws"] if "draws" in ex else [ex] * n
        kinds |= {d["mode"] for d in draws}
        if mix.mode == "pair":
            assert ex["partner"] == [n - 1 - i for i in range(n)]
            ox, oy = _timm_mix(monkeypatch, mix, x.copy(), y, draws[:n // 2], "pair")
        else:
            assert ex["partner"] == [(i - 1) % n for i in range(n)]
            ox, oy = np.empty_like(x), np.empty((n, K), np.float32)
            for i, p in enumerate(ex["partner"]):
                rx, ry = _timm_mix(monkeypatch, mix, x[[i, p]].copy(), y[[i, p]], [draws[i]], "batch")
                ox[i], oy[i] = rx[0], ry[0]
        # timm keeps elem / pair lambdas in float32 and computes 1 - lam in float32: one
        # rounding apart from fastq's float(1 - lam); with these [0, 1] images at most
        # 2^-24 in the product and 2^-24 in the sum.  Batch mode: bit for bit.
        np.testing.assert_allclose(gx, ox, rtol=0, atol=0 if mix.mode == "batch" else 2.0 ** -23)
        np.testing.assert_allclose(gy, oy, rtol=0, atol=1e-6)
    return kinds


_CASES = {
    "pair": dict(mixup_alpha=0.4, cutmix_alpha=1.0, prob=0.8, mode="pair"),
    "pair_minmax": dict(mixup_alpha=0.4, cutmix_minmax=(0.2, 0.8), prob=0.8, mode="pair"),
    "pair_no_correct_lam": dict(mixup_alpha=0.0, cutmix_alpha=0.5, mode="pair", correct_lam=False),
    "batch_minmax": dict(mixup_alpha=0.3, cutmix_minmax=(0.25, 0.9), prob=0.9),
    "batch_no_correct_lam": dict(mixup_alpha=0.0, cutmix_alpha=0.3, correct_lam=False),
    "elem_minmax_no_correct_lam": dict(mixup_alpha=0.3, cutmix_minmax=(0.3, 0.7), prob=0.9, mode="elem",
                                       correct_lam=False),
    "elem_no_correct_lam": dict(mixup_alpha=0.3, cutmix_alpha=0.4, prob=0.9, mode="elem", correct_lam=False),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_matches_timm_mixup(monkeypatch, case):
    pytest.importorskip("timm.data.mixup", reason="the reference is timm's Mixup (pip install timm)")
    mix = fastq.MixUpCutMix(label_smoothing=0.1, num_classes=K, **_CASES[case])
    plain, mixed = _pipes(mix, n=160 if mix.mode == "batch" else N, layout="NHWC" if "elem" in case else "NCHW")
    with plain, mixed:
        kinds = _check_against_timm(monkeypatch, plain, mixed, 0) | _check_against_timm(monkeypatch, plain, mixed, 1)
    assert "cutmix" in kinds
    assert ("mixup" in kinds) == (mix.mixup_alpha > 0)
    assert (None in kinds) == (mix.prob < 1)


# ---- the same semantics without timm -------------------------------------------------

@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_pair_mode_swaps_within_pairs(layout):
    """Rows i and n - 1 - i share one draw: MixUp blends each with the other (float32:
    b * (1 - lam) + a * lam), CutMix swaps the box; labels mix with the same lambda."""
    mix = fastq.MixUpCutMix(mixup_alpha=0.5, cutmix_alpha=1.0, prob=0.8, label_smoothing=0.1, num_classes=K,
                            mode="pair")
    plain, mixed = _pipes(mix, layout=layout)
    kinds = set()
    with plain, mixed:
        for b, ((x, y), (gx, gy)) in enumerate(zip(_epoch(plain), _epoch(mixed))):
            ex = mixed.explain_batch(0, b)
            x, gx, n = _nchw(x, layout), _nchw(gx, layout), len(y)
            soft = _smooth(y, 0.1)
            for i in range(n):
                j, d = n - 1 - i, ex["draws"][i]
                assert d == ex["draws"][j]
                kinds.add(d["mode"])
                want = x[i].copy()
                if d["mode"] == "mixup":
                    want = x[j] * np.float32(1.0 - d["lam"]) + x[i] * np.float32(d["lam"])
                elif d["mode"] == "cutmix":
                    x0, y0, x1, y1 = d["box"]
                    want[:, y0:y1, x0:x1] = x[j][:, y0:y1, x0:x1]
                assert gx[i].tobytes() == want.tobytes()
                np.testing.assert_allclose(gy[i], d["lam"] * soft[i] + (1 - d["lam"]) * soft[j], atol=1e-7)
    assert kinds == {None, "mixup", "cutmix"}


def test_cutmix_minmax_box():
    """timm's rand_bbox_minmax: cut_h in [int(H * lo), int(H * hi)), cut_w likewise, the
    box inside the image, every size and corner reached; lambda is the area's, also with
    correct_lam=False, and no Beta draw is reported."""
    lo, hi = 0.25, 0.75
    mix = fastq.CutMix(num_classes=K, cutmix_minmax=(lo, hi), correct_lam=False)
    assert mix.cutmix_alpha == 1.0 and mix.cutmix_minmax == (lo, hi)
    plain, mixed = _pipes(mix, n=4000, batch_size=2)
    sizes, corners = set(), set()
    with plain, mixed:
        for b in range(len(mixed)):
            ex = mixed.explain_batch(0, b)
            x0, y0, x1, y1 = ex["box"]
            assert ex["mode"] == "cutmix" and ex["lam_drawn"] is None
            assert int(H * lo) <= y1 - y0 < int(H * hi) and int(W * lo) <= x1 - x0 < int(W * hi)
            assert 0 <= x0 and x1 <= W and 0 <= y0 and y1 <= H
            assert ex["lam"] == 1.0 - (x1 - x0) * (y1 - y0) / (H * W)
            sizes.add((y1 - y0, x1 - x0))
            corners.add((y0, x0))
    assert sizes == {(h, w) for h in range(int(H * lo), int(H * hi)) for w in range(int(W * lo), int(W * hi))}
    assert {c for c in corners if c[0] == 0 and c[1] == 0} and max(c[0] for c in corners) == H - int(H * lo)


@pytest.mark.parametrize("mode", ["batch", "elem", "pair"])
def test_correct_lam_false_keeps_the_beta_lambda(mode):
    """The same draws and boxes as correct_lam=True; only lambda (and so the labels)
    differs: the Beta draw instead of the pasted area."""
    kw = dict(mixup_alpha=0.0, cutmix_alpha=1.0, label_smoothing=0.0, num_classes=K, mode=mode)
    _, on = _pipes(fastq.MixUpCutMix(correct_lam=True, **kw))
    _, off = _pipes(fastq.MixUpCutMix(correct_lam=False, **kw))
    differ = 0
    with on, off:
        for b, ((ax, ay), (bx, by)) in enumerate(zip(_epoch(on), _epoch(off))):
            assert ax.tobytes() == bx.tobytes()
            ea, eb = on.explain_batch(0, b), off.explain_batch(0, b)
            for da, db in zip(ea.get("draws", [ea]), eb.get("draws", [eb])):
                x0, y0, x1, y1 = da["box"]
                assert da["box"] == db["box"] and da["lam_drawn"] == db["lam_drawn"] == db["lam"]
                assert da["lam"] == 1.0 - (x1 - x0) * (y1 - y0) / (H * W)
                differ += da["lam"] != db["lam"]
            np.testing.assert_allclose(by.sum(1), 1.0, atol=1e-6)
    assert differ > 0


def test_pair_mode_needs_even_batches():
    """timm asserts an even batch; fastq says so when the Pipeline is built where it
    knows the sizes, else at the odd batch."""
    imgs, labels = _data(10)
    mix = fastq.MixUpCutMix(mixup_alpha=0.2, num_classes=K, mode="pair")
    with pytest.raises(ValueError, match=r"mode='pair'\) needs an even batch_size .* got batch_size=3"):
        fastq.Pipeline(fastq.sources.Arrays(imgs, labels), batch_size=3, mix=mix)
    with fastq.Pipeline(fastq.sources.Arrays(imgs, labels), batch_size=4, drop_remainder=False, mix=mix) as p:
        assert [b[1].shape[0] for b in p] == [4, 4, 2]  # 10 % 4 = 2 rows: even, fine
    with pytest.raises(ValueError, match=r"last batch of each epoch has 1 rows \(9 samples, batch_size=4\)"):
        fastq.Pipeline(fastq.sources.Arrays(imgs[:9], labels[:9]), batch_size=4, drop_remainder=False, mix=mix)
    data = [(imgs[i].astype(np.float32), int(labels[i])) for i in range(7)]  # a Python source: at that batch
    with fastq.Pipeline(data, batch_size=2, workers=1, drop_remainder=False, mix=mix) as p:
        it = iter(p)
        for _ in range(3):
            next(it)
        with pytest.raises(ValueError, match=r"batch 3 of epoch 0 has 1 rows .* pass drop_remainder=True"):
            next(it)
        assert p.stats()["slots_leased"] == 0
    from fastq._native import _image  # the native check behind them
    params = mix._params()
    with pytest.raises(ValueError, match="mode 'pair' needs an even number of rows"):
        _image.mix_draws(params, 0, 0, 0, 3, H, W)
    x, soft = np.zeros((3, H, W, 3), np.float32), np.zeros((3, K), np.float32)
    with pytest.raises(ValueError, match="mode 'pair' needs an even number of rows"):
        _image.mix_apply(params, 0, 0, 0, x, _image.MIX_DTYPES["float32"], 0, labels[:3],
                         _image.MIX_LABEL_TYPES["int64"], soft)


def test_option_errors():
    with pytest.raises(ValueError, match=r"cutmix_minmax needs 0 <= min < max <= 1"):
        fastq.CutMix(num_classes=K, cutmix_minmax=(0.8, 0.2))
    with pytest.raises(ValueError, match=r"cutmix_minmax must be None or \(min, max\)"):
        fastq.CutMix(num_classes=K, cutmix_minmax=0.5)
    with pytest.raises(ValueError, match="two finite numbers"):
        fastq.CutMix(num_classes=K, cutmix_minmax=(0.1, float("nan")))
    with pytest.raises(ValueError, match="correct_lam must be True or False"):
        fastq.CutMix(num_classes=K, correct_lam=0)
    # int(10 * 0.31) == int(10 * 0.35): timm's randint(3, 3) would raise; fastq says so at build
    imgs, labels = _data(8)
    with pytest.raises(ValueError, match=r"cutmix_minmax=\(0.31, 0.35\) gives no box size for 12 x 10"):
        fastq.Pipeline(fastq.sources.Arrays(imgs, labels), batch_size=4,
                       mix=fastq.MixUpCutMix(cutmix_minmax=(0.31, 0.35), num_classes=K))
    m = fastq.MixUpCutMix(mixup_alpha=0.0, cutmix_alpha=0.0, cutmix_minmax=(0.2, 0.8), num_classes=K)
    assert m.cutmix_alpha == 1.0  # timm: minmax enables CutMix with alpha 1
    assert "cutmix_minmax=(0.2, 0.8)" in repr(m) and "correct_lam=True" in repr(m)
