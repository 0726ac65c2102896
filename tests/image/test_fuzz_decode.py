"""Bounded-time fuzzing of the decoders (issue 12, items 1 and 2).

A deterministic corpus of mutated JPEG/PNG/WebP files (tests/helpers/fuzz_corpus.py: DQT or
DHT removed, sampling factors / dimensions / restart markers changed, bytes flipped,
truncated) goes through whole pipelines: for every sample the outcome (pixels, or
error class and message) must be the same with 1 and 2 workers, on a repeat run and
in another visiting order, and every error names its sample and file.  Properties
of the JPEG path are checked on their own: no table survives from one image to the
next, and sampling layouts libjpeg-turbo does not decode correctly are refused.

Measured on the development machine: the corpus test takes ~3 s.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import fuzz_corpus as F  # noqa: I100  (puts the repo root on sys.path)
from helpers import image_ref as ref
from fastq._native import _image
from fastq import errors as E
from fastq import ops as O


@pytest.fixture(scope="module")
def seeds():
    return F.seeds()


def spec(chain=None):
    return _image.ImageSpec(O.compile_ops(chain or F.OPS, dtype="uint8"))


def outcome(fn):
    try:
        return ("ok", fn().tobytes())
    except E.FastqError as e:
        return ("error", type(e).__name__, str(e))


def test_mutated_corpus_same_output_from_1_and_2_workers_repeat_and_order(tmp_path):
    corpus = F.mutants(seed=0, per_seed=8)
    paths = F.write(corpus, str(tmp_path))
    runs = [F.run(paths, 1), F.run(paths, 2), F.run(paths, 1), F.run(paths, 2, shuffle=True)]
    nondet, unnamed = F.compare(paths, runs)
    assert nondet == [], f"{len(nondet)} of {len(paths)} samples depend on the run: {nondet[:5]}"
    assert unnamed == []
    n_err = sum(o[0] == "error" for o in runs[0].values())
    assert 0 < n_err < len(paths)  # the corpus exercises both outcomes
    for p, o in runs[0].items():
        if o[0] == "error":
            assert o[1] in ("DecodeError", "UnsupportedFormatError", "ImageTooLargeError", "EmptyImageError"), o


def test_fresh_pipelines_agree_on_sampling_factor_mutants(tmp_path, seeds):
    """8 fresh pipelines, 1 distinct output per sample (uninitialised memory
    would show as differences between fresh allocations)."""
    rng = np.random.default_rng(5)
    corpus = [("y21_cb11_cr14", F.set_sampling(seeds["jpeg422"], [(2, 1), (1, 1), (1, 4)]))]
    for k in range(12):
        f = [(int(rng.integers(1, 5)), int(rng.integers(1, 5))) for _ in range(3)]
        corpus.append((f"sof{k}", F.set_sampling(seeds["jpeg420" if k % 2 else "jpeg422"], f)))
    paths = F.write(corpus, str(tmp_path))
    runs = [F.run(paths, 2) for _ in range(8)]
    nondet, unnamed = F.compare(paths, runs)
    assert nondet == [] and unnamed == []


def test_missing_dqt_fails_whatever_the_worker_decoded_before(seeds):
    for name in ("jpeg420", "jpeg_q20", "jpeg_opt", "jpeg_prog", "jpeg_gray"):
        broken = F.drop(seeds[name], 0xDB)
        alone = outcome(lambda: spec().process_encoded(broken)[0])
        assert alone[0] == "error" and alone[1] == "DecodeError" and "Quantization table" in alone[2]
        for before in ("jpeg_q20", "jpeg_opt", "jpeg444", "jpeg_prog"):
            s = spec()
            s.process_encoded(seeds[before])
            assert outcome(lambda: s.process_encoded(broken)[0]) == alone, (name, before)


def test_missing_dht_uses_the_standard_tables_deterministically(seeds):
    """cv2 encodes with libjpeg's standard Huffman tables, so a baseline file
    without its DHT segments (as in Motion-JPEG frames) must decode exactly like
    the original (reference: pip cv2 on the original), whatever came before."""
    for name in ("jpeg420", "jpeg422", "jpeg444", "jpeg_rst", "jpeg_gray", "jpeg_q20"):
        full = ref.cv2_decode_rgb(seeds[name])
        h, w = full.shape[:2]
        chain = [O.CenterCrop((h, w))]
        for cut in (None, 0):
            stripped = F.drop(seeds[name], 0xC4, cut)
            for before in (None, "jpeg_opt", "jpeg_q20"):
                s = spec(chain)
                if before:
                    s.process_encoded(seeds[before])
                out, _ = s.process_encoded(stripped)
                np.testing.assert_array_equal(out, full, err_msg=f"{name} cut={cut} after {before}")


def test_optimised_huffman_without_dht_is_an_error_not_the_previous_tables(seeds):
    stripped = F.drop(seeds["jpeg_opt"], 0xC4)
    alone = outcome(lambda: spec().process_encoded(stripped)[0])
    for before in ("jpeg_opt", "jpeg420"):
        s = spec()
        s.process_encoded(seeds[before])
        assert outcome(lambda: s.process_encoded(stripped)[0]) == alone


def supported(f):
    """The layouts fastq accepts (csrc/image/decode/fq_image_decode.cpp: sampling_supported)."""
    h0, v0 = f[0]
    for h, v in f:
        if h0 % h or v0 % v or h0 // h not in (1, 2, 4) or v0 // v not in (1, 2):
            return False
    return True


def test_issue_layout_is_refused_with_its_name(seeds):
    bad = F.set_sampling(seeds["jpeg422"], [(2, 1), (1, 1), (1, 4)])
    with pytest.raises(E.UnsupportedFormatError, match=r"Y h2v1, Cb h1v1, Cr h1v4"):
        spec().process_encoded(bad)


@settings(max_examples=60, derandomize=True, deadline=None, database=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=3, max_size=3),
       st.sampled_from(["jpeg420", "jpeg422", "jpeg444", "jpeg_prog"]))
def test_sampling_layouts_are_refused_or_decode_deterministically(seeds, factors, base):
    data = F.set_sampling(seeds[base], factors)
    results = set()
    for before in (None, "jpeg_q20", "png", None):
        s = spec()
        if before:
            s.process_encoded(seeds[before])
        results.add(outcome(lambda: s.process_encoded(data, 3, 0, 7)[0]))
    assert len(results) == 1, (factors, base)
    (res,) = results
    if not supported(factors):
        assert res[1] == "UnsupportedFormatError", res
        assert ", ".join(f"{n} h{h}v{v}" for n, (h, v) in zip(("Y", "Cb", "Cr"), factors)) in res[2]
    else:
        assert res[0] == "ok" or res[1] == "DecodeError", res
