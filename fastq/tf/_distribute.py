"""tf.distribute: one fastq Pipeline per input pipeline (:func:`distribute_dataset`) and
the shard of a native source an input pipeline reads (:func:`shard_source`)."""
from typing import Any, Callable

from fastq.pipeline import Pipeline
from fastq.tf._dataset import dataset


def shard_source(source: Any, input_context: Any) -> Any:
    """`source` restricted to this input pipeline's shard
    (``input_context.input_pipeline_id`` of ``num_input_pipelines``), for
    fastq's native sources (Files, Bytes, Arrays)."""
    n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
    if n == 1:
        return source
    if not hasattr(source, "shard"):
        raise TypeError(f"{type(source).__name__} cannot be sharded by fastq; shard the data yourself "
                        f"(input pipeline {i} of {n})")
    return source.shard(n, i)


def distribute_dataset(strategy: Any, make_pipeline: Callable[[Any, int], Pipeline], global_batch_size: int, *,
                       options: Any = None) -> Any:
    """A distributed dataset for `strategy`, one fastq Pipeline per input pipeline.

    Calls ``strategy.distribute_datasets_from_function``; for each input
    pipeline (one per worker) it calls ``make_pipeline(input_context,
    per_replica_batch_size)``, which must return a new :class:`fastq.Pipeline`
    that

    * reads only its shard: e.g. ``shard_source(source, input_context)``, i.e.
      ``source.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)``;
    * has ``batch_size == per_replica_batch_size``
      (``input_context.get_per_replica_batch_size(global_batch_size)``);
    * should use ``drop_remainder=True`` so every worker runs the same number
      of steps (collectives need that) and shapes are static.

    The pipelines made are kept in the returned object's ``fastq_pipelines``
    attribute (for stats and close) when it accepts attributes.
    """
    pipelines = []

    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(global_batch_size)
        p = make_pipeline(input_context, per_replica)
        if not isinstance(p, Pipeline):
            raise TypeError(f"make_pipeline must return a fastq.Pipeline, got {type(p).__name__}")
        if p.batch_size != per_replica:
            raise ValueError(f"make_pipeline returned a Pipeline with batch_size={p.batch_size}; this input "
                             f"pipeline needs the per-replica batch size {per_replica} "
                             f"(global {global_batch_size} / {input_context.num_replicas_in_sync} replicas)")
        pipelines.append(p)
        return dataset(p)

    dist = strategy.distribute_datasets_from_function(dataset_fn, options)
    try:
        dist.fastq_pipelines = pipelines
    except AttributeError:
        pass
    return dist
