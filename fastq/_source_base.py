"""The base class every fastq source derives from (kept apart to avoid import cycles)."""


class Source:
    """Base class of fastq sources: something that can make a Pipeline backend."""

    def _make_backend(self, pipeline, **options):  # pragma: no cover - abstract
        raise TypeError(f"{type(self).__name__} cannot feed a Pipeline")
