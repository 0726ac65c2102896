"""The independent reference of the golden tests (tests/image/test_golden.py): the frozen
vectors of tests/data/golden.json and a pure-Python replay of fastq's counter-based RNG, the
shuffle permutation and the reference task's draws.  Other tests (ops, targets, tensorpack)
replay their own draws through RefRng."""
import json
import math
import os

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15

with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "golden.json"), encoding="utf-8") as _f:
    GOLDEN = json.load(_f)


def _with_tuples(x, paths, path=""):
    """A JSON value with the lists at `paths` ("/key/0/...", recorded next to the
    value) turned back into tuples, as the explain records hold them."""
    if isinstance(x, dict):
        return {k: _with_tuples(v, paths, f"{path}/{k}") for k, v in x.items()}
    if isinstance(x, list):
        items = [_with_tuples(v, paths, f"{path}/{i}") for i, v in enumerate(x)]
        return tuple(items) if path in paths else items
    return x


# -- independent reference of csrc/core/fq_rng.h ---------------------------------------

def _mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class RefRng:
    """SplitMix64 stream keyed by (seed, epoch, index), as specified in fq_rng.h."""

    def __init__(self, seed, epoch, index):
        h = _mix64((seed ^ 0x6A09E667F3BCC909) & M64)
        h = _mix64((h + epoch * GAMMA + 0xBB67AE8584CAA73B) & M64)
        self.state = _mix64(h ^ (index & M64))

    def u64(self):
        self.state = (self.state + GAMMA) & M64
        return _mix64(self.state)

    def uniform(self):
        return (self.u64() >> 11) * (1.0 / 9007199254740992.0)

    def uniform_range(self, lo, hi):
        u = self.uniform()
        if not hi > lo:
            return lo
        v = lo + (hi - lo) * u
        return v if v < hi else lo

    def below(self, n):
        if n <= 1:
            return 0
        threshold = ((1 << 64) - n) % n
        while True:
            x = self.u64()
            if x >= threshold:
                return x % n


def ref_permutation(seed, epoch, n):
    out = list(range(n))
    r = RefRng(seed, epoch, M64)  # FQ_RNG_SHUFFLE_INDEX
    for i in range(n - 1, 0, -1):
        j = r.below(i + 1)
        out[i], out[j] = out[j], out[i]
    return out


def ref_rrc_box(r, H, W, scale, ratio):
    area = H * W
    lr0, lr1 = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = area * r.uniform_range(*scale)
        ar = math.exp(r.uniform_range(lr0, lr1))
        w = round(math.sqrt(target * ar))   # round half to even == nearbyint
        h = round(math.sqrt(target / ar))
        if 0 < w <= W and 0 < h <= H:
            y = r.below(H - h + 1)
            x = r.below(W - w + 1)
            return (x, y, w, h)
    raise AssertionError("the golden keys never take the fallback branch")


def ref_plan(seed, epoch, index, H, W, rrc_size, rrc_scale, flip_p, jitter, affine):
    """Draws of RandomResizedCrop + HorizontalFlip + ColorJitter + RandomAffine, in
    chain order, from the stream of (seed, epoch, index)."""
    r = RefRng(seed, epoch, index)
    box = ref_rrc_box(r, H, W, rrc_scale, (3 / 4, 4 / 3))
    h, w = rrc_size
    flip = r.uniform() < flip_p
    perm = [0, 1, 2, 3]
    for k in (3, 2, 1):
        j = r.below(k + 1)
        perm[k], perm[j] = perm[j], perm[k]
    factors = [r.uniform_range(lo, hi) for lo, hi in jitter]   # every component enabled
    names = ("brightness", "contrast", "saturation", "hue")
    deg, trans, scl, shear = affine
    angle = r.uniform_range(-deg, deg)
    tx = round(r.uniform_range(-trans[0] * w, trans[0] * w))
    ty = round(r.uniform_range(-trans[1] * h, trans[1] * h))
    sc = r.uniform_range(*scl)
    shx = r.uniform_range(-shear, shear)
    shy = r.uniform_range(0.0, 0.0)
    a = math.radians(angle)
    ca, sa = math.cos(a), math.sin(a)
    kx, ky = math.tan(math.radians(shx)), math.tan(math.radians(shy))
    a00, a01 = sc * (ca + sa * ky), sc * (ca * kx + sa)
    a10, a11 = sc * (-sa + ca * ky), sc * (-sa * kx + ca)
    cx, cy = (w - 1) / 2, (h - 1) / 2
    matrix = [[a00, a01, cx + tx - (a00 * cx + a01 * cy)], [a10, a11, cy + ty - (a10 * cx + a11 * cy)]]
    return {"box": box, "hflip": flip, "order": [names[k] for k in perm],
            **dict(zip(names, factors)), "angle": angle, "translate": (float(tx), float(ty)), "scale": sc,
            "shear": (shx, shy), "matrix": matrix}
