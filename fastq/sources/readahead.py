"""Read-ahead for the native sources that read files or shards (``io_threads=``):
I/O threads fetch the next samples' bytes in the pipeline's epoch order while the
workers decode.  Used by Files/Folder (fastq.sources.images, .folder) and by TFRecord
and WebDataset (fastq.sources.tfrecord, .webdataset).  See docs/sources.md.
"""

__all__ = ["read_ahead_stats"]


def _with_read_ahead(src, reader):
    """`reader` wrapped in a fresh ReadAhead (one per pipeline: it follows that
    pipeline's epoch order) when src.io_threads > 0; the last one made is kept in
    src._last_read_ahead (a weak reference) for read_ahead_stats()."""
    if not src.io_threads:
        return reader
    import weakref
    from fastq._native import _image
    ra = _image.ReadAhead(reader, int(src.io_threads), int(src.read_ahead))
    src._last_read_ahead = weakref.ref(ra)  # the pipeline owns it; its threads end with it
    return ra


def read_ahead_stats(source):
    """{"read_ahead": samples the I/O threads served, "read_direct": samples a
    worker read itself} of the last pipeline built on `source` (io_threads > 0),
    while that pipeline exists."""
    ref = getattr(source, "_last_read_ahead", None)
    ra = ref() if ref is not None else None
    return ra.stats() if ra is not None else {}


def _init_file_read_ahead(src, io_threads, read_ahead, delay_us=0):
    """Files/Folder: with io_threads (or a simulated latency, for benchmarks) read
    through the native file reader (+ read-ahead): same bytes, same errors."""
    _check_io(io_threads, read_ahead, type(src).__name__)
    src.io_threads, src.read_ahead, src._read_delay_us = io_threads, read_ahead, int(delay_us)
    src.kind = "reader" if io_threads or src._read_delay_us else "files"


def _file_task_items(src):
    if src.kind != "reader":
        return src._items
    from fastq._native import _image
    return _with_read_ahead(src, _image.FileReader(src._items, src._read_delay_us))


def _check_io(io_threads, read_ahead, what):
    if not isinstance(io_threads, int) or not 0 <= io_threads <= 256:
        raise ValueError(f"{what}: io_threads must be an int in [0, 256], got {io_threads!r}")
    if not isinstance(read_ahead, int) or not 1 <= read_ahead <= 1 << 20:
        raise ValueError(f"{what}: read_ahead must be an int in [1, 2**20], got {read_ahead!r}")
