"""Batch-level MixUp / CutMix (fastq.MixUpCutMix, csrc/image/batch/fq_batch_mix.cpp).

Every mixed batch is checked against torchvision.transforms.v2.MixUp / CutMix replayed
with the lambda and box that ``Pipeline.explain_batch`` reports, on the same batch
taken from a pipeline without ``mix``.  timm's options (cutmix_minmax, correct_lam,
mode="pair") are checked against timm's Mixup in tests/ops/test_mix_timm.py."""
import numpy as np
import pytest

import fastq
import fastq.ops as fops
from fastq._native import _image

N, H, W, K = 22, 12, 10, 5


def _data(n=N, seed=0):
    rs = np.random.RandomState(seed)
    imgs = rs.randint(0, 256, (n, H, W, 3), dtype=np.uint8)
    labels = rs.randint(0, K, n).astype(np.int64)
    return imgs, labels


def _pipes(mix, *, n=N, batch_size=4, workers=2, dtype="float32", layout="NHWC", seed=3, shuffle=True,
           drop_remainder=True, ops=(fops.HorizontalFlip(),)):
    imgs, labels = _data(n)
    kw = dict(batch_size=batch_size, workers=workers, dtype=dtype, layout=layout, seed=seed, shuffle=shuffle,
              drop_remainder=drop_remainder, ops=list(ops))
    plain = fastq.Pipeline(fastq.sources.Arrays(imgs, labels), **kw)
    mixed = fastq.Pipeline(fastq.sources.Arrays(imgs, labels), mix=mix, **kw)
    return plain, mixed


def _epoch(pipe):
    return [tuple(np.array(a) for a in b) for b in pipe]


def _smooth(labels, smoothing):
    off = smoothing / K
    return np.where(np.eye(K, dtype=bool)[labels], 1.0 - smoothing + off, off).astype(np.float32)


def _tv_mix(x_nchw, soft, ex):
    """torchvision v2 MixUp / CutMix on a batch, with fastq's draw."""
    import torch
    from torchvision.transforms import v2

    x, y = torch.from_numpy(np.ascontiguousarray(x_nchw)), torch.from_numpy(soft)
    if ex["mode"] == "mixup":
        class Replay(v2.MixUp):
            def make_params(self, flat_inputs):
                return dict(lam=ex["lam"])
    elif ex["mode"] == "cutmix":
        class Replay(v2.CutMix):
            def make_params(self, flat_inputs):
                return dict(box=ex["box"], lam_adjusted=ex["lam"])
    else:
        return x_nchw, soft
    ox, oy = Replay(num_classes=K)(x, y)  # 2-D (smoothed) labels are mixed as they are
    return ox.numpy(), oy.numpy()


def _to_nchw(x, layout):
    return x if layout == "NCHW" else x.transpose(0, 3, 1, 2)


def _from_nchw(x, layout):
    return x if layout == "NCHW" else x.transpose(0, 2, 3, 1)


def _check_epoch(plain, mixed, epoch, mode="batch"):
    got = _epoch(mixed)
    ref = _epoch(plain)
    assert len(got) == len(ref) > 0
    layout = mixed._mix.layout
    kinds = set()
    for b, ((x, y), (gx, gy)) in enumerate(zip(ref, got)):
        ex = mixed.explain_batch(epoch, b)
        soft = _smooth(y, mixed.mix.label_smoothing)
        assert gy.dtype == np.float32 and gy.shape == (len(y), K)
        np.testing.assert_allclose(gy.sum(1), 1.0, atol=1e-6)
        if mode == "batch":
            kinds.add(ex["mode"])
            ox, oy = _tv_mix(_to_nchw(x, layout), soft, ex)
            ox = _from_nchw(ox, layout)
        else:
            ox, oy = x.copy(), soft.copy()
            for i, d in enumerate(ex["draws"]):
                kinds.add(d["mode"])
                p = ex["partner"][i]
                assert p == (i - 1) % len(y)
                pair_x = _to_nchw(np.stack([x[p], x[i]]), layout)
                px, py = _tv_mix(pair_x, np.stack([soft[p], soft[i]]), d)
                ox[i], oy[i] = _from_nchw(px, layout)[1], py[1]
        if x.dtype == np.float32:
            np.testing.assert_allclose(gx, ox, rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(gx, ox)
        np.testing.assert_allclose(gy, oy, rtol=1e-6, atol=1e-6)
    return kinds


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_mixup_matches_torchvision(layout, smoothing):
    plain, mixed = _pipes(fastq.MixUp(0.4, num_classes=K, label_smoothing=smoothing), layout=layout)
    with plain, mixed:
        for epoch in range(2):
            assert _check_epoch(plain, mixed, epoch) == {"mixup"}


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_cutmix_matches_torchvision(layout):
    plain, mixed = _pipes(fastq.CutMix(1.0, num_classes=K, label_smoothing=0.1), layout=layout)
    with plain, mixed:
        assert _check_epoch(plain, mixed, 0) == {"cutmix"}
        for b in range(len(mixed)):
            ex = mixed.explain_batch(0, b)
            x0, y0, x1, y1 = ex["box"]
            assert 0 <= x0 <= x1 <= W and 0 <= y0 <= y1 <= H
            assert ex["lam"] == pytest.approx(1.0 - (x1 - x0) * (y1 - y0) / (H * W), abs=1e-15)


def test_cutmix_box_follows_torchvision_params():
    """The box is torchvision's make_params for the drawn lambda and centre."""
    mix = fastq.CutMix(1.0, num_classes=K)
    plain, mixed = _pipes(mix, n=400, batch_size=2)
    with plain, mixed:
        for b in range(50):
            ex = mixed.explain_batch(1, b)
            x0, y0, x1, y1 = ex["box"]
            r = 0.5 * np.sqrt(1.0 - ex["lam_drawn"])
            rw, rh = int(r * W), int(r * H)
            # the centre r_x (r_y) is x0 + rw unless clamped at 0, else x1 - rw unless clamped at W
            cx = x0 + rw if x0 > 0 else (x1 - rw if x1 < W else None)
            if cx is not None:
                assert max(cx - rw, 0) == x0 and min(cx + rw, W) == x1 and 0 <= cx < W
            assert x1 - x0 <= 2 * rw and y1 - y0 <= 2 * rh


def test_mixup_cutmix_switch_and_elem_mode_match_torchvision():
    mix = fastq.MixUpCutMix(mixup_alpha=0.3, cutmix_alpha=1.0, switch_prob=0.5, prob=0.8, label_smoothing=0.1,
                            num_classes=K, mode="elem")
    plain, mixed = _pipes(mix, n=40, batch_size=8, layout="NCHW")
    with plain, mixed:
        kinds = _check_epoch(plain, mixed, 0, mode="elem") | _check_epoch(plain, mixed, 1, mode="elem")
    assert kinds == {None, "mixup", "cutmix"}


def test_batch_mode_switch_prob_and_prob():
    mix = fastq.MixUpCutMix(mixup_alpha=0.3, cutmix_alpha=1.0, switch_prob=0.25, prob=0.6, num_classes=K)
    plain, mixed = _pipes(mix, n=8000, batch_size=2)
    with plain, mixed:
        modes = [mixed.explain_batch(0, b)["mode"] for b in range(len(mixed))]
        assert _check_epoch(plain, mixed, 0) == {None, "mixup", "cutmix"}
    n = len(modes)
    applied = sum(m is not None for m in modes)
    assert abs(applied / n - 0.6) < 0.03
    assert abs(sum(m == "cutmix" for m in modes) / applied - 0.25) < 0.03


@pytest.mark.parametrize("dtype", ["uint8", "float16", "bfloat16"])
def test_other_dtypes_round_as_documented(dtype):
    """float16 / bfloat16: b * (1 - lam) + a * lam in float32, rounded to nearest even;
    uint8: the same in float32, then floor(v + 0.5).  CutMix copies exactly."""
    pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    mix = fastq.MixUpCutMix(mixup_alpha=0.5, cutmix_alpha=1.0, num_classes=K, label_smoothing=0.0)
    plain, mixed = _pipes(mix, dtype=dtype, n=40)
    with plain, mixed:
        ref, got = _epoch(plain), _epoch(mixed)
        kinds = set()
        for b, ((x, _), (gx, _)) in enumerate(zip(ref, got)):
            ex = mixed.explain_batch(0, b)
            kinds.add(ex["mode"])
            xr = np.roll(x, 1, 0)
            if ex["mode"] == "mixup":
                lam, m = np.float32(ex["lam"]), np.float32(1.0 - ex["lam"])
                v = xr.astype(np.float32) * m + x.astype(np.float32) * lam
                want = np.clip(np.floor(v + np.float32(0.5)), 0, 255).astype(np.uint8) if dtype == "uint8" \
                    else v.astype(x.dtype)
            else:
                x0, y0, x1, y1 = ex["box"]
                want = x.copy()
                want[:, y0:y1, x0:x1] = xr[:, y0:y1, x0:x1]
            assert gx.dtype == x.dtype
            diff = np.abs(gx.astype(np.float64) - want.astype(np.float64))
            step = 1.0 if dtype == "uint8" else np.abs(want.astype(np.float64)).max() * 2.0 ** -7
            assert diff.max() <= step  # one rounding step at most (a fused multiply-add)
            assert (diff > 0).mean() < 0.01
        assert kinds == {"mixup", "cutmix"}


def test_uint8_mixup_matches_torchvision_on_floats():
    """uint8 MixUp = torchvision's MixUp on the float values, rounded (torchvision
    itself refuses integer images)."""
    plain, mixed = _pipes(fastq.MixUp(1.0, num_classes=K), dtype="uint8")
    with plain, mixed:
        for b, ((x, y), (gx, gy)) in enumerate(zip(_epoch(plain), _epoch(mixed))):
            ex = mixed.explain_batch(0, b)
            ox, _ = _tv_mix(_to_nchw(x.astype(np.float32), "NHWC"), _smooth(y, 0.0), ex)
            assert np.abs(_from_nchw(ox, "NHWC") - gx).max() <= 0.5 + 1e-4


def test_partial_last_batch_rolls_its_own_rows():
    mix = fastq.MixUp(1.0, num_classes=K)
    plain, mixed = _pipes(mix, n=10, batch_size=4, drop_remainder=False)
    with plain, mixed:
        assert mixed.explain_batch(0, 2)["rows"] == 2
        assert mixed.explain_batch(0, 2)["partner"] == [1, 0]
        _check_epoch(plain, mixed, 0)
        with pytest.raises(IndexError):
            mixed.explain_batch(0, 3)


@pytest.mark.parametrize("kw", [{}, dict(mode="pair", cutmix_minmax=(0.2, 0.8)), dict(mode="pair", correct_lam=False),
                                dict(mode="elem", cutmix_minmax=(0.3, 0.9), correct_lam=False)],
                         ids=["batch", "pair_minmax", "pair_no_correct_lam", "elem_minmax_no_correct_lam"])
def test_deterministic_across_workers_runs_and_resume(kw):
    mix = fastq.MixUpCutMix(mixup_alpha=0.2, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=K, **kw)
    imgs, labels = _data(64)

    def pipe(workers):
        return fastq.Pipeline(fastq.sources.Arrays(imgs, labels), batch_size=4, workers=workers, seed=5,
                              shuffle=True, ops=[fops.RandomResizedCrop(8), fops.HorizontalFlip()], mix=mix)

    with pipe(1) as p1, pipe(2) as p2, pipe(2) as p3:
        a = [_epoch(p1) for _ in range(2)]
        b = [_epoch(p2) for _ in range(2)]
        _epoch(p3)
        it = iter(p3)
        first = [tuple(np.array(x) for x in next(it)) for _ in range(5)]
        sd = p3.state_dict()
        del it
    for ea, eb in zip(a, b):
        for ba, bb in zip(ea, eb):
            for xa, xb in zip(ba, bb):
                assert xa.tobytes() == xb.tobytes()
    assert a[0][0][1].tobytes() != a[1][0][1].tobytes() or a[0][0][0].tobytes() != a[1][0][0].tobytes()
    for ba, bf in zip(a[1][:5], first):
        assert all(x.tobytes() == y.tobytes() for x, y in zip(ba, bf))
    assert sd == {"epoch": 1, "position": 5, "batch_size": 4, "drop_remainder": True}
    with pipe(2) as p4:
        p4.load_state_dict(sd)
        rest = _epoch(p4)
    assert len(rest) == len(a[1]) - 5
    for ba, br in zip(a[1][5:], rest):
        assert all(x.tobytes() == y.tobytes() for x, y in zip(ba, br))


def test_draws_depend_on_seed_epoch_batch_only():
    mix = fastq.MixUpCutMix(mixup_alpha=0.2, cutmix_alpha=1.0, num_classes=K)
    p1, p2 = _pipes(mix)
    with p1, p2:
        p2.close()
        _, p3 = _pipes(mix, seed=4)
        with p3:
            d = [p2.explain_batch(e, b) for e in range(2) for b in range(3)]
            assert d == [p2.explain_batch(e, b) for e in range(2) for b in range(3)]
            lams = {x["lam_drawn"] for x in d}
            assert len(lams) == len(d)
            assert p3.explain_batch(0, 0)["lam_drawn"] != p2.explain_batch(0, 0)["lam_drawn"]
    own = fastq.MixUpCutMix(mixup_alpha=0.2, cutmix_alpha=1.0, num_classes=K, seed=4)
    _, p5 = _pipes(own, seed=99)
    with p5:
        assert p5.explain_batch(0, 0) == p3.explain_batch(0, 0) | {"seed": 4}


@pytest.mark.parametrize("alpha", [0.2, 1.0, 2.5])
def test_beta_sampler_distribution(alpha):
    from scipy import stats
    x = _image.mix_beta_samples(12345, alpha, 20000)
    assert ((x >= 0) & (x <= 1)).all()
    res = stats.kstest(x, stats.beta(alpha, alpha).cdf)
    assert res.pvalue > 1e-3, res
    ref = np.random.default_rng(0).beta(alpha, alpha, 20000)
    assert stats.ks_2samp(x, ref).pvalue > 1e-3
    assert np.array_equal(x, _image.mix_beta_samples(12345, alpha, 20000))


def test_beta_sampler_tiny_alpha_stays_finite():
    x = _image.mix_beta_samples(1, 1e-3, 2000)
    assert np.isfinite(x).all() and ((x >= 0) & (x <= 1)).all()
    assert ((x < 1e-3) | (x > 1 - 1e-3)).mean() > 0.9  # mass at the ends


def test_iterable_source_gets_soft_labels_too():
    imgs, labels = _data(12)
    data = [(imgs[i].astype(np.float32), int(labels[i])) for i in range(12)]
    mix = fastq.MixUp(1.0, num_classes=K, seed=2)
    with fastq.Pipeline(data, batch_size=4, workers=1, mix=mix) as p:
        assert p.output_spec[1] == ((K,), np.dtype(np.float32))
        for b, (x, y) in enumerate(p):
            ex = p.explain_batch(0, b)
            ref = imgs[4 * b:4 * b + 4].astype(np.float32)
            ox, oy = _tv_mix(ref.transpose(0, 3, 1, 2), _smooth(labels[4 * b:4 * b + 4], 0.0), ex)
            np.testing.assert_allclose(x, ox.transpose(0, 2, 3, 1), rtol=1e-6, atol=1e-4)
            np.testing.assert_allclose(y, oy, atol=1e-6)


def test_files_source_with_labels(tmp_path):
    cv2 = pytest.importorskip("cv2", reason="writes the JPEG files")
    imgs, labels = _data(8)
    paths = []
    for i, im in enumerate(imgs):
        paths.append(str(tmp_path / f"{i}.png"))
        cv2.imwrite(paths[-1], im)
    labels[5] = K  # out of range
    with fastq.Pipeline(fastq.sources.Files(paths, labels), batch_size=4, workers=2, ops=[fops.Resize((H, W))],
                        mix=fastq.MixUp(num_classes=K)) as p:
        assert p.output_spec == [((H, W, 3), np.dtype(np.float32)), ((K,), np.dtype(np.float32))]
        it = iter(p)
        x, y = next(it)
        assert y.shape == (4, K)
        del x, y
        with pytest.raises(ValueError, match=r"label 5 of sample 5 \(.*5\.png\) is outside \[0, num_classes=5\)"):
            next(it)
        assert p.stats()["slots_leased"] == 0


def test_errors():
    imgs, labels = _data(8)
    with pytest.raises(ValueError, match="num_classes is required"):
        fastq.MixUp(0.2)
    with pytest.raises(ValueError, match="mixup_alpha or cutmix_alpha must be > 0"):
        fastq.MixUpCutMix(mixup_alpha=0.0, cutmix_alpha=0.0, num_classes=3)
    with pytest.raises(ValueError, match="mode must be 'batch', 'elem' or 'pair'"):
        fastq.MixUp(1.0, num_classes=3, mode="pairs")
    with pytest.raises(ValueError, match="label_smoothing"):
        fastq.MixUp(1.0, num_classes=3, label_smoothing=1.0)
    with pytest.raises(ValueError, match="prob"):
        fastq.MixUpCutMix(prob=1.5, num_classes=3)
    with pytest.raises(TypeError, match="mix must be a fastq.MixUpCutMix"):
        fastq.Pipeline(fastq.sources.Arrays(imgs, labels), batch_size=4, mix="mixup")
    with pytest.raises(ValueError, match="gives no labels"):
        fastq.Pipeline(fastq.sources.Arrays(imgs), batch_size=4, return_index=True, mix=fastq.MixUp(num_classes=K))
    with pytest.raises(ValueError, match="one integer class label per sample"):
        fastq.Pipeline(fastq.sources.Arrays(imgs, labels.astype(np.float32)), batch_size=4,
                       mix=fastq.MixUp(num_classes=K))
    with fastq.Pipeline(fastq.sources.Arrays(imgs, labels), batch_size=4) as p:
        with pytest.raises(TypeError, match="needs a Pipeline built with mix"):
            p.explain_batch(0, 0)
    bad = labels.copy()
    bad[6] = -1
    with fastq.Pipeline(fastq.sources.Arrays(imgs, bad), batch_size=4, workers=1,
                        mix=fastq.MixUp(num_classes=K)) as p:
        it = iter(p)
        before = next(it)
        with pytest.raises(ValueError, match=r"label -1 of sample 6 is outside"):
            next(it)
        del before
        assert p.stats()["slots_leased"] == 0


@pytest.mark.tf
def test_tf_dataset_has_soft_labels():
    tf = pytest.importorskip("tensorflow", reason="fastq.tf needs TensorFlow")
    import fastq.tf
    plain, mixed = _pipes(fastq.MixUpCutMix(0.2, 1.0, num_classes=K), layout="NHWC")
    with plain, mixed:
        ds = fastq.tf.dataset(mixed)
        assert ds.element_spec[1] == tf.TensorSpec((4, K), tf.float32)
        ys = [y.numpy() for _, y in ds]
        assert len(ys) == len(mixed)
        np.testing.assert_allclose(np.concatenate(ys).sum(1), 1.0, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "uint8", "float32"])
def test_native_mixup_rounding_with_a_ragged_row(dtype):
    """45 values per row: the float16 F16C path (8 at a time) and its scalar tail agree
    with numpy's b * (1 - lam) + a * lam in float32, then the documented rounding."""
    import platform
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    rs = np.random.RandomState(1)
    npdt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    x = (rs.randint(0, 256, (5, 3, 5, 3)) if dtype == "uint8" else rs.rand(5, 3, 5, 3) * 4).astype(npdt)
    labels = np.arange(5, dtype=np.int32) % 3
    soft = np.empty((5, 3), np.float32)
    params = (0.7, 0.0, 0.5, 1.0, 0.0, 3, False)
    ex = _image.mix_draws(params, 9, 2, 4, 5, 3, 5)[0]
    orig = x.copy()
    assert _image.mix_apply(params, 9, 2, 4, x, _image.MIX_DTYPES[dtype], 0, labels,
                            _image.MIX_LABEL_TYPES["int32"], soft) == (-1, "")
    lam, m = np.float32(ex["lam"]), np.float32(1.0 - ex["lam"])
    v = np.roll(orig, 1, 0).astype(np.float32) * m + orig.astype(np.float32) * lam
    want = np.minimum(np.floor(v + np.float32(0.5)), 255).astype(np.uint8) if dtype == "uint8" else v.astype(npdt)
    if platform.machine() in ("x86_64", "AMD64"):  # no fused multiply-add there
        assert x.tobytes() == want.tobytes()
    else:
        np.testing.assert_allclose(x.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1)
    np.testing.assert_allclose(soft, ex["lam"] * np.eye(3)[labels] + (1 - ex["lam"]) * np.eye(3)[np.roll(labels, 1)],
                               atol=1e-7)


def test_prob_zero_leaves_images_and_smooths_labels():
    mix = fastq.MixUpCutMix(mixup_alpha=1.0, cutmix_alpha=1.0, prob=0.0, label_smoothing=0.2, num_classes=K)
    plain, mixed = _pipes(mix)
    with plain, mixed:
        for (x, y), (gx, gy) in zip(_epoch(plain), _epoch(mixed)):
            assert x.tobytes() == gx.tobytes()
            np.testing.assert_allclose(gy, _smooth(y, 0.2), atol=1e-7)
        assert mixed.explain_batch(0, 0)["mode"] is None and mixed.explain_batch(0, 0)["lam"] == 1.0


def test_tfrecord_labels_become_soft_in_the_slot(tmp_path):
    """A TFRecord's labels (written natively after the image) are mixed as well; the
    soft labels are the slot's extra output (the batch stays a view of the slot)."""
    cv2 = pytest.importorskip("cv2", reason="encodes the PNG images")
    from fastq.tfrecord_codec import encode_example, tfrecord_frame
    imgs, labels = _data(12)
    path = tmp_path / "train.tfrecord"
    with open(path, "wb") as f:
        for im, lab in zip(imgs, labels):
            f.write(tfrecord_frame(encode_example({"image/encoded": cv2.imencode(".png", im)[1].tobytes(),
                                                   "image/class/label": int(lab)})))
    mix = fastq.CutMix(1.0, num_classes=K, label_smoothing=0.1)
    kw = dict(batch_size=4, workers=2, ops=[fops.Resize((H, W))], return_index=True)
    with fastq.Pipeline(fastq.sources.TFRecord([str(path)]), **kw) as plain, \
            fastq.Pipeline(fastq.sources.TFRecord([str(path)]), mix=mix, **kw) as mixed:
        assert [s for s in mixed.output_spec] == [((H, W, 3), np.dtype(np.float32)), ((K,), np.dtype(np.float32)),
                                                   ((), np.dtype(np.int64))]
        n = 0
        for b, ((x, y, i), batch) in enumerate(zip(plain, mixed)):
            gx, gy, gi = batch
            assert gy.base is gx.base  # both view the slot (its Lease)
            np.testing.assert_array_equal(gi, i)
            np.testing.assert_array_equal(y, labels[i])
            ox, oy = _tv_mix(x.transpose(0, 3, 1, 2), _smooth(y, 0.1), mixed.explain_batch(0, b))
            np.testing.assert_array_equal(gx, ox.transpose(0, 2, 3, 1))
            np.testing.assert_allclose(gy, oy, atol=1e-6)
            n += 1
            del gx, gy, gi, batch
        assert n == 3
