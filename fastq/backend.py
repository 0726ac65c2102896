"""The contract between a Pipeline and the backend its source makes.

A source (``fastq.sources.Source``) turns itself into a :class:`Backend` with
``source._make_backend(config, **options)``: ``config`` is the
:class:`BackendConfig` (the Pipeline settings a backend needs), ``options`` are
the source options the user gave ``Pipeline(...)``.  The Pipeline then talks to
the backend only through the methods below.
"""
import abc
import dataclasses
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

__all__ = ["Backend", "BackendConfig"]


@dataclasses.dataclass(frozen=True)
class BackendConfig:
    """What a backend is told by its Pipeline."""

    batch_size: int
    drop_remainder: bool
    workers: Optional[int]  # as the user asked; None: the backend picks
    # fastq.scheduling.Resolved: how native workers schedule themselves (None: unchanged)
    scheduling: Any = None


class Backend(abc.ABC):
    """One source feeding one Pipeline's ring.

    Must have: :meth:`output_spec` and :meth:`start`, and set ``workers``
    (the producer threads it runs).  The other methods have defaults for a
    backend that cannot do what they ask.
    """

    workers: int

    @abc.abstractmethod
    def output_spec(self) -> List[Tuple[Tuple[int, ...], np.dtype]]:
        """(shape, dtype) of each output field of one sample."""

    @abc.abstractmethod
    def start(self, ring: Any, run_id: int, epoch: int, position: int = 0) -> Any:
        """Start producing epoch `epoch` into `ring` under `run_id`, skipping
        its first `position` batches.  Returns the producers: an object with
        ``stop(timeout)`` (called after the ring's run was cancelled or
        ended) and optionally ``stats()``."""

    def discover(self) -> bool:
        """Learn what is needed before the first epoch; False if the source
        is empty (the epoch is then empty too)."""
        return True

    def batches_per_epoch(self) -> Optional[int]:
        """Batches in every epoch, or None when the backend cannot say and
        cannot start an epoch at a batch position (no resume, no EpochSync)."""
        return None

    def explain(self, epoch: int, index: int) -> Dict[str, Any]:
        """What was sampled for dataset sample `index` in `epoch`."""
        raise TypeError("explain() needs a native image source")

    def sample_error(self, failure: BaseException, producers: Any) -> BaseException:
        """The exception to raise for a failed sample.  `failure` is the
        error carried by the batch's slot (``.index``: the sample); a backend
        may add the file (``.path``) or return the exception the user's own
        code raised."""
        return failure

    def stats(self) -> Dict[str, Any]:
        """Backend counters merged into ``Pipeline.stats()``."""
        return {}
