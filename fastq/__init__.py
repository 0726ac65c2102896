"""fastq: a native, GIL-free input pipeline for TensorFlow.

    import fastq
    with fastq.Pipeline(fastq.sources.Iterable(my_dataflow), batch_size=64, queue_size=8) as p:
        for images, labels in p:
            ...

See docs/architecture.md for the architecture and docs/pipeline.md ("Lifetime of a
batch") for the lifetime rules of batches.
"""
__version__ = "0.1.0"

from fastq import errors, sources  # noqa: E402,F401
from fastq.pipeline import Pipeline  # noqa: E402,F401
from fastq.mix import CutMix, MixUp, MixUpCutMix  # noqa: E402,F401
from fastq.ops._custom import get_include  # noqa: E402,F401 (next to CustomOp, whose header it finds)
from fastq.scheduling import WorkerPriority  # noqa: E402,F401

__all__ = ["Pipeline", "sources", "errors", "get_include", "__version__", "MixUpCutMix", "MixUp", "CutMix",
           "WorkerPriority"]
