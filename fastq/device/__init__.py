"""Helpers shared by fastq's accelerator paths, whatever the framework.

* :mod:`fastq.device.convert`: :class:`~fastq.device.convert.ConversionSpec`, the one
  parser of the on-device conversion of uint8 batches (normalize, cast, layout) that
  ``fastq.torch``, ``fastq.jax`` and ``fastq.tf`` each run with their own kernels.
* :mod:`fastq.device.cuda`: finding the CUDA runtime and pinning a ring's slot arena
  (``Pipeline(pin_memory=...)``), through the compiled ``fastq._native._cuda``.

Neither imports a framework, and nothing here imports ``fastq.torch``, ``fastq.jax`` or
``fastq.tf``: they import this package, never the other way round.
"""
