"""TensorFlow integration: zero-copy ``tf.data`` datasets over a fastq Pipeline.

    import fastq, fastq.tf
    pipe = fastq.Pipeline(fastq.sources.Files(paths, labels), batch_size=64, ops=[...])
    ds = fastq.tf.dataset(pipe)          # one pipeline epoch per dataset iteration
    model.fit(ds, epochs=10)

How a batch reaches TensorFlow
------------------------------
By default the dataset is the tf.data source op ``FastqDataset`` of fastq's
TensorFlow kernel library (fastq/tf/_native.py, csrc/tf/fq_tf_dataset.cc; built
against the installed TensorFlow at first use): its iterator takes each batch
from the ring in C++ and returns tensors whose buffer is the slot (a refcounted
TensorBuffer holding the slot's lease), with no Python and no GIL per batch.
Python runs once per epoch, to start and end the epoch's producers.  No byte is
copied between the native worker that wrote the batch and the tensor
TensorFlow reads (tests/tf/test_tf.py and tests/tf/test_tf_native.py check the
addresses).

Where the kernel cannot be built (no compiler, no TF headers) the dataset is
``tf.data.Dataset.from_generator`` with a ``TensorSpec`` signature, which runs
the generator through ``tf.numpy_function``.  The generator yields the
pipeline's batch arrays themselves (views of a ring slot).  The slot memory is
64-byte aligned, so TensorFlow's ndarray->Tensor conversion in the py_func
kernel wraps that memory instead of copying it, and keeps a reference to the
numpy array - and through it to the slot's ``Lease`` - for as long as the
tensor lives.  ``pipeline.stats()["tf_feed"]`` says which feed and why.

When a slot goes back to the ring
---------------------------------
When the last tensor aliasing it is freed: at once with the native op.  With
``from_generator``, TensorFlow frees a tensor from C++ threads without the GIL,
so it does not drop the numpy reference at once: it queues it, and the queue
is drained whenever an eager tensor is deallocated, a py_func returns or a v1
``Session.run`` starts.  That feeder drains it before each batch it fetches
and, while it waits for a batch, every 20 ms from one helper thread, so slots
freed by graph code always reach the producers.  :func:`flush_released` drains
it on demand (useful before reading ``pipeline.stats()["slots_leased"]``).

Slots held at a time = batches your code keeps (a loop variable included) +
elements in tf.data buffers after the feeder (``prefetch``, ``shuffle``,
``prefetch_to_device`` in flight, ...).  The feeder itself adds no buffer
(tf.data's automatic prefetch injection is turned off for it): the ring *is*
the prefetch buffer.  Any free slot takes the next batch, so the producers keep
working while fewer than ``queue_size`` slots are held; when all are held the
pipeline reports StalledError.  ``.cache()`` on the returned dataset copies each
element first (a cache keeps its elements forever); put ``.map(fastq.tf.copy)``
before a ``.cache()`` further down the chain.

Lifetime: the dataset object (and every dataset chained after it) keeps its
pipeline alive, but the op's feed registry (or the generator callable that TF
keeps in a process-wide registry) reaches it only weakly: once the pipeline is
closed and neither your code nor a dataset references it, it is collected, and
its slot memory is freed once no tensor aliases it.

Iterator checkpoints
--------------------
``tf.train.Checkpoint(iterator=it)`` saves the pipeline's (epoch, position) with the native
op, at every point: before the first batch (the epoch the iterator would begin), mid-epoch,
at and after the epoch's end; a restore, into the same iterator or a fresh pipeline's, goes
on with exactly the batches that followed (docs/tensorflow.md).  What cannot be restored
refuses to be saved: a Python-iterable source (InvalidArgumentError), and the
``from_generator`` feed, whose iterator TensorFlow does not save (FailedPreconditionError
"PyFunc is stateful"); save ``pipeline.state_dict()`` yourself there.

One iteration at a time
-----------------------
A Pipeline runs one epoch at a time.  A second tf.data iterator over the same
pipeline (from the same or another dataset made by :func:`dataset`) that
starts while the first is still live fails with :class:`ConcurrentIterationError`
at its first element; the first keeps going.  An iterator stops being live when
it is exhausted, fails, or is deleted.
"""
from typing import Any

from fastq.tf._native import ConcurrentIterationError
from fastq.tf._callbacks import _epoch_sync_class, stage_stats_callback
from fastq.tf._dataset import copy, dataset, element_spec
from fastq.tf._device import from_dlpack, to_device
from fastq.tf._distribute import distribute_dataset, shard_source
from fastq.tf._generator_feed import flush_released

__all__ = ["dataset", "element_spec", "distribute_dataset", "shard_source", "from_dlpack", "to_device",
           "flush_released", "copy", "ConcurrentIterationError", "EpochSync"]

# One namespace, the implementation by topic: _dataset (dataset, element_spec, copy),
# _generator_feed (the from_generator feed, flush_released), _native (the FastqDataset
# op's feed, ConcurrentIterationError), _device (to_device, from_dlpack), _distribute
# (distribute_dataset, shard_source), _callbacks (stage_stats_callback, EpochSync), and the
# submodules ops (the TF kernel and its ops) and serve (tf.data service).  The public
# names say fastq.tf, as when they were defined here.
for _obj in (ConcurrentIterationError, stage_stats_callback, copy, dataset, element_spec, from_dlpack, to_device,
             distribute_dataset, shard_source, flush_released):
    _obj.__module__ = __name__
del _obj

_LAZY: dict = {}


def __getattr__(name: str) -> Any:
    if name == "ops":  # the submodule fastq.tf.ops (the native TensorFlow op), imported on first use
        import importlib
        return importlib.import_module(__name__ + ".ops")
    # keras is imported only when EpochSync is used
    if name == "EpochSync":
        if name not in _LAZY:
            _LAZY[name] = _epoch_sync_class()
        return _LAZY[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
