"""fastq's measuring tools: ``fastq bench``, the demo and the generated data they run on.

==============  ===================================================================
``tasks``       the benchmark tasks (reference, train, eval, small-96, hires, and the
                augmentation presets randaugment, fbresnet), defined once
``data``        generated JPEG sets, image files / TFRecord shards as input
``testdata``    deterministic ImageNet-like JPEGs and broken files, from bundled photos
``measure``     cores, CPU model, CPU time split, resident memory
``peers``       what fastq and each peer library run for a task
``child``       the fresh process one measurement runs in (``python -m fastq.bench.child``)
``runner``      :func:`run`: rounds of every peer, medians, same-run ratios
``report``      :func:`print_report` and :func:`write_outputs` (JSON, PNG)
``plot``        the PNG chart (matplotlib)
``profile``     the single-thread per-stage profile (``--profile``)
``entropy``     entropy-coded bytes a crop decode reads from a JPEG (``--profile``)
``hires``       ``--task hires --hires-forms``: original / prepared / max-side copies in one run
``feed``        ``--task feed``: feeders driving a synthetic trainer that shares the CPUs
``demo``        ``python -m fastq.bench.demo``: fastq against a Python + cv2 loop
``objserver``   an S3-compatible / Azure / plain HTTP test server with fault injection (a package:
                one module per dialect)
``servers``     starters for servers fastq did not write: nginx (http, https with a test CA), moto
``remote``      ``--task remote``: local sources against the same data behind ``objserver``,
                nginx and moto
==============  ===================================================================

None of this is imported by ``import fastq``; the library does not depend on it.
The names below are the API that ``fastq bench`` (fastq/cli/bench.py) and
``benchmarks/bench_images.py`` use.
"""
from fastq.bench.data import (IMAGE_EXTENSIONS, BenchInputError, TFRecordInput, default_data_dir, find_images,
                              find_tfrecords, generated_dataset)
from fastq.bench.measure import contention, cpu_model, usable_cores
from fastq.bench.report import print_report, write_outputs
from fastq.bench.runner import BUSY_LIMIT, DEFAULT_PEERS, available, check_peers, default_peers, run, run_child
from fastq.bench.tasks import TASKS

__all__ = ["BenchInputError", "BUSY_LIMIT", "DEFAULT_PEERS", "IMAGE_EXTENSIONS", "TASKS", "TFRecordInput",
           "available", "check_peers", "contention", "default_peers", "cpu_model", "default_data_dir", "find_images",
           "find_tfrecords", "generated_dataset", "print_report", "run", "run_child", "usable_cores",
           "write_outputs"]
