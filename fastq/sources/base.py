"""fastq.sources.Source: the base class of every source (the other modules of
this package derive from it)."""


class Source:
    """Base class of fastq sources: something that can make a Pipeline backend."""

    def _make_backend(self, config, **options):  # pragma: no cover - abstract
        """A fastq.backend.Backend feeding a Pipeline with ``config``
        (fastq.backend.BackendConfig) and the user's source ``options``."""
        raise TypeError(f"{type(self).__name__} cannot feed a Pipeline")
