"""The mutated decoder corpus (tests/helpers/fuzz_corpus.py) through the augmentation
policies (issue 18): every sample's outcome is the same with 1 and 2 workers and in
another visiting order, every error names its sample and file (on_error="raise"), and
with on_error="skip" the epoch is complete, the skips are counted the same way and the
batches are bit-identical for 1 and 2 workers."""
import numpy as np
import pytest

from helpers import fuzz_corpus as F  # noqa: I100  (puts the repo root on sys.path)
import fastq
from fastq import ops as O

CHAINS = {
    "randaugment": [O.RandomResizedCrop(24), O.HorizontalFlip(), O.RandAugment(num_ops=2, magnitude=9)],
    "trivialaugment": [O.Resize(28), O.CenterCrop(24), O.TrivialAugmentWide()],
    "autoaugment": [O.RandomResizedCrop(24), O.AutoAugment()],
    "timm": [O.RandomResizedCrop(24), O.HorizontalFlip(), O.TimmRandAugment(),
             O.TimmAutoAugment("v0r", magnitude_std=0.5), O.TimmAugMix()],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz_policies")
    return F.write(F.mutants(seed=1, per_seed=6), str(d))


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_policies_on_mutated_corpus_raise(corpus, name):
    ops = CHAINS[name]
    runs = [F.run(corpus, 1, ops=ops), F.run(corpus, 2, ops=ops), F.run(corpus, 2, shuffle=True, ops=ops)]
    nondet, unnamed = F.compare(corpus, runs)
    assert nondet == [], f"{len(nondet)} of {len(corpus)} samples depend on the run: {nondet[:3]}"
    assert unnamed == []
    n_err = sum(o[0] == "error" for o in runs[0].values())
    assert 0 < n_err < len(corpus)


def _skip_epoch(paths, workers, ops):
    p = fastq.Pipeline(fastq.sources.Files(paths), batch_size=4, queue_size=4, workers=workers, ops=ops,
                       dtype="uint8", seed=11, on_error="skip", drop_remainder=False, return_index=True,
                       stall_timeout=60)
    with p:
        batches = [(x.copy(), i.copy()) for x, i in p]
        st = p.stats()
    return batches, st["skipped"], st["skipped_by_reason"]


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_policies_on_mutated_corpus_skip(corpus, name):
    ops = CHAINS[name]
    one, n1, why1 = _skip_epoch(corpus, 1, ops)
    two, n2, why2 = _skip_epoch(corpus, 2, ops)
    assert sum(len(i) for _, i in one) == len(corpus)  # every position filled
    assert n1 == n2 > 0 and why1 == why2
    for (x1, i1), (x2, i2) in zip(one, two):
        assert np.array_equal(i1, i2) and np.array_equal(x1, x2)
