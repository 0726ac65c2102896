"""The determinism check that op tests share: one chain over in-memory images, run with 1
and with 2 workers, must give the same batches bit for bit (docs/ops.md, "The path of one sample")."""
import numpy as np

import fastq


def assert_same_for_1_and_2_workers(imgs, chain, *, seed=5, batch_size=4, shape=None):
    """Run ``chain`` on ``fastq.sources.Arrays(imgs)`` (uint8 output) with 1 and 2 workers;
    assert every image came out, of ``shape`` when given, and that both runs are equal.
    Returns the 1-worker images, concatenated."""
    runs = []
    for workers in (1, 2):
        with fastq.Pipeline(fastq.sources.Arrays(imgs), batch_size=batch_size, workers=workers, ops=chain,
                            dtype="uint8", seed=seed) as p:
            runs.append(np.concatenate([b[0] for b in p]))
    assert runs[0].shape[0] == len(imgs)
    if shape is not None:
        assert runs[0].shape == shape
    assert np.array_equal(runs[0], runs[1])
    return runs[0]


def rows_by_index(pipe):
    """{sample index: [its row of every output]} over one epoch of a pipeline built with
    ``return_index=True`` (the index is the last output), whatever the batch order."""
    out = {}
    for b in pipe:
        b = [np.array(x) for x in b]
        for r, idx in enumerate(b[-1]):
            out[int(idx)] = [x[r] for x in b[:-1]]
    return out
