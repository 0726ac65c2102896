"""Where samples come from: every fastq source, one module each.

=====================  ================================================================
``base``               :class:`Source`, the base class (a source makes a Pipeline backend)
``iterable``           :class:`Iterable`: any Python iterable or tensorpack DataFlow
``images``             :class:`Files`, :class:`Bytes`, :class:`Arrays`: native image
                       sources (read, decode, augment without the GIL)
``folder``             :class:`Folder`: a class-per-subfolder image tree
``tfrecord``           :class:`TFRecord`: TFRecord shards of ``tf.train.Example`` records
``webdataset``         :class:`WebDataset`: tar shards, samples grouped by key
``stream``             :class:`Stream`: encoded images from a Python iterable
``readahead``          ``io_threads=`` read-ahead and :func:`read_ahead_stats`
=====================  ================================================================

Every source is reachable as ``fastq.sources.X``; see docs/sources.md.
"""
from fastq.sources.base import Source
from fastq.sources.iterable import Iterable
from fastq.sources.images import Arrays, Bytes, Files, ImageSource
from fastq.sources.folder import Folder
from fastq.sources.tfrecord import TFRecord
from fastq.sources.webdataset import WebDataset
from fastq.sources.stream import Stream
from fastq.sources.readahead import read_ahead_stats
from fastq.sources.storage import RemoteOptions

__all__ = ["Source", "Iterable", "ImageSource", "Files", "Bytes", "Arrays", "Folder", "TFRecord", "WebDataset",
           "Stream", "read_ahead_stats", "RemoteOptions"]
