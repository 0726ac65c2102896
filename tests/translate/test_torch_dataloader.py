"""fastq.torch.DataLoader against torch.utils.data.DataLoader on torchvision ImageFolder
datasets: the same len(), shapes, dtypes, layout and labels; DistributedSampler ranks and
epochs; refused arguments; the fallback to torch's own loader; slot lifetime."""
import os
import shutil
import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import DistributedSampler, RandomSampler, SequentialSampler, WeightedRandomSampler
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms import v2

import fastq.torch as ft
from fastq.ops import _base
from fastq.translate import TranslationError

pytestmark = pytest.mark.torch

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
EVAL = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    from fastq.bench.testdata import make_jpeg_dataset
    base = tmp_path_factory.mktemp("imagefolder")
    paths = make_jpeg_dataset(str(base / "raw"), 14)
    for i, p in enumerate(paths):
        d = base / "tree" / f"class{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(p, d / os.path.basename(p))
    return str(base / "tree")


def numbered(root, transform):
    """An ImageFolder whose targets are the sample indices (to follow samples)."""
    ds = datasets.ImageFolder(root, transform=transform)
    ds.samples = [(p, i) for i, (p, _) in enumerate(ds.samples)]
    ds.targets = list(range(len(ds.samples)))
    return ds


@pytest.mark.parametrize("drop_last", [False, True])
def test_eval_preset_matches_torch_loader(root, drop_last):
    ds = datasets.ImageFolder(root, transform=EVAL)
    theirs = torch.utils.data.DataLoader(ds, batch_size=4, drop_last=drop_last)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = ft.DataLoader(ds, batch_size=4, drop_last=drop_last, num_workers=2)
    assert len(ours) == len(theirs) == (3 if drop_last else 4)
    got = list(ours)
    want = list(theirs)
    assert len(got) == len(want)
    for (a, la), (b, lb) in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype == torch.float32 and a.is_contiguous()
        assert la.dtype == lb.dtype == torch.int64
        torch.testing.assert_close(la, lb)
        if "pil_bilinear" in _base.INTERPOLATIONS:  # Pillow's resize: the same bytes, float32 ulps after Normalize
            torch.testing.assert_close(a, b, rtol=0, atol=2e-6)
        else:  # OpenCV's resize does not antialias: PSNR in the translate tests and docs/migrate.md
            assert (a - b).abs().mean() < 0.05
    ours.close()


def test_uint8_output_and_target_transform(root):
    tf = v2.Compose([v2.Resize(256), v2.CenterCrop(224), v2.PILToTensor()])
    ds = datasets.ImageFolder(root, transform=tf, target_transform=lambda t: t * 10)
    a, la = next(iter(ft.DataLoader(ds, batch_size=5)))
    b, lb = next(iter(torch.utils.data.DataLoader(ds, batch_size=5)))
    assert a.shape == b.shape == (5, 3, 224, 224) and a.dtype == b.dtype == torch.uint8
    torch.testing.assert_close(la, lb)
    assert la.dtype == torch.int64


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_ranks(root, shuffle, drop_last):
    ds = numbered(root, EVAL)
    world = 3
    for epoch in (0, 1):
        union = []
        for rank in range(world):
            s_t = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=shuffle, seed=3, drop_last=drop_last)
            s_f = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=shuffle, seed=3, drop_last=drop_last)
            s_t.set_epoch(epoch)
            s_f.set_epoch(epoch)
            theirs = torch.utils.data.DataLoader(ds, batch_size=2, sampler=s_t)
            ours = ft.DataLoader(ds, batch_size=2, sampler=s_f, seed=0)
            assert len(ours) == len(theirs)
            lt = torch.cat([y for _, y in theirs])
            lf = torch.cat([y for _, y in ours])
            torch.testing.assert_close(lf, lt)  # the same samples, in the same order, padding included
            union.extend(lf.tolist())
            ours.close()
        n = len(ds)
        if drop_last:
            assert len(union) == (n // world) * world and len(set(union)) == len(union)
        else:
            assert sorted(set(union)) == list(range(n))


def test_samplers_and_shuffle(root):
    ds = numbered(root, EVAL)
    seq = ft.DataLoader(ds, batch_size=4, sampler=SequentialSampler(ds))
    assert torch.cat([y for _, y in seq]).tolist() == list(range(len(ds)))
    rnd = ft.DataLoader(ds, batch_size=4, sampler=RandomSampler(ds), seed=1)
    e0, e1 = (torch.cat([y for _, y in rnd]).tolist() for _ in range(2))
    assert sorted(e0) == sorted(e1) == list(range(len(ds))) and e0 != e1  # a new permutation each epoch
    sh = ft.DataLoader(ds, batch_size=4, shuffle=True, seed=1)
    assert torch.cat([y for _, y in sh]).tolist() == e0


@pytest.mark.parametrize("kw, words", [
    ({"collate_fn": lambda b: b}, "collate_fn"),
    ({"batch_sampler": [[0, 1]], "batch_size": 1}, "batch_sampler"),
    ({"worker_init_fn": lambda w: None}, "worker_init_fn"),
    ({"sampler": "weighted"}, "WeightedRandomSampler"),
    ({"sampler": "replacement"}, "RandomSampler"),
    ({"batch_size": None}, "batch_size=None"),
    ({"prefetch_factor": 2}, "prefetch_factor"),
    ({"in_order": False}, "in_order=False"),
    ({"sampler": "sequential", "shuffle": True}, "mutually exclusive"),
])
def test_refused_arguments(root, kw, words):
    ds = datasets.ImageFolder(root, transform=EVAL)
    if kw.get("sampler") == "weighted":
        kw["sampler"] = WeightedRandomSampler([1.0] * len(ds), len(ds))
    elif kw.get("sampler") == "sequential":
        kw["sampler"] = SequentialSampler(ds)
    elif kw.get("sampler") == "replacement":
        kw["sampler"] = RandomSampler(ds, replacement=True)
    with pytest.raises(ValueError, match=words):
        ft.DataLoader(ds, **kw)


def test_custom_loader_runs_in_torch(root):
    def my_loader(path):
        from PIL import Image
        return Image.open(path).convert("RGB")

    ds = datasets.ImageFolder(root, transform=EVAL, loader=my_loader)
    with pytest.warns(UserWarning, match="my_loader"):
        ours = ft.DataLoader(ds, batch_size=4)
    assert ours.pipeline is None
    for (a, la), (b, lb) in zip(ours, torch.utils.data.DataLoader(ds, batch_size=4)):
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(la, lb)
    with pytest.raises(TranslationError, match="my_loader"):
        ft.DataLoader(ds, batch_size=4, strict=True)


def test_python_tail_through_the_loader(root):
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.Lambda(lambda im: im.rotate(90)), T.ToTensor()])
    ds = datasets.ImageFolder(root, transform=tf)
    with pytest.warns(UserWarning, match="Lambda"):
        ours = ft.DataLoader(ds, batch_size=4, num_workers=2)
    theirs = torch.utils.data.DataLoader(ds, batch_size=4)
    assert len(ours) == len(theirs)
    for (a, la), (b, lb) in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(la, lb)
        if "pil_bilinear" in _base.INTERPOLATIONS:  # the Python steps get the very image PIL would give them
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        else:
            assert (a - b).abs().mean() < 0.02
    assert ours.stats()["translation"]["python_samples"] == len(ds)
    ours.close()


def test_workers_bit_identical_and_batches_stay_valid(root):
    tf = T.Compose([T.RandomResizedCrop(48), T.RandomHorizontalFlip(), T.TrivialAugmentWide(), T.ToTensor(),
                    T.Normalize(MEAN, STD), T.RandomErasing()])
    ds = datasets.ImageFolder(root, transform=tf)
    one = [a.clone() for a, _ in ft.DataLoader(ds, batch_size=3, num_workers=1, seed=9, shuffle=True)]
    loader = ft.DataLoader(ds, batch_size=3, num_workers=2, seed=9, shuffle=True, prefetch_factor=2)
    assert loader.pipeline.queue_size == 4
    it = iter(loader)
    first, _ = next(it)  # a view of a slot: its lease lives as long as the tensor
    rest = [a.clone() for a, _ in it]
    torch.testing.assert_close(first, one[0], rtol=0, atol=0)  # not overwritten by the later batches
    for a, b in zip(one[1:], rest):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    del first
    second = [a.clone() for a, _ in loader]  # epoch 1: other draws
    assert any(not torch.equal(a, b) for a, b in zip(one, second))
    loader.close()


class FakeEvent:
    """Stands in for a CUDA event: completes only when the test (or synchronize) says."""
    log = []

    def __init__(self):
        self.done = False
        self.recorded = False
        self.synced = False
        FakeEvent.log.append(self)

    def record(self):
        self.recorded = True

    def query(self):
        return self.done

    def synchronize(self):
        self.synced = True
        self.done = True


def test_pin_memory_keeps_slots_until_the_copies_are_done(root, monkeypatch):
    """pin_memory=True with CUDA: each batch's slot is kept (not reused by the producers)
    until an event recorded on the current stream when the next batch is asked for has
    completed; at most queue_size - 2 are kept, the oldest waited for beyond that."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(ft, "_new_cuda_event", FakeEvent)
    FakeEvent.log = []
    ds = datasets.ImageFolder(root, transform=T.Compose([T.CenterCrop(32), T.PILToTensor()]))
    loader = ft.DataLoader(ds, batch_size=2, num_workers=2, pin_memory=True, prefetch_factor=2)
    limit = loader.pipeline.queue_size - 2
    assert limit == 2
    want = [a.clone() for a, _ in torch.utils.data.DataLoader(ds, batch_size=2)]
    got = []
    for step, (images, _) in enumerate(loader):
        got.append(images.clone())
        events = FakeEvent.log
        assert len(events) == step  # one per batch handed back, recorded when the next was asked for
        assert all(e.recorded for e in events)
        pending = [e for e in events if not e.done]
        assert len(pending) == min(step, limit)  # never complete on their own: the oldest were waited for
        assert all(e.synced for e in events[:max(0, step - limit)])
    assert all(e.done for e in FakeEvent.log)  # the end of the epoch waits for the rest
    assert len(FakeEvent.log) == len(want)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    FakeEvent.log = []
    # events that complete at once release at once: nothing is waited for
    monkeypatch.setattr(ft, "_new_cuda_event", lambda: type("Done", (FakeEvent,), {"query": lambda self: True})())
    assert sum(1 for _ in loader) == len(want) and not any(e.synced for e in FakeEvent.log)
    loader.close()
