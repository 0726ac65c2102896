"""Exceptions raised by fastq.

Every error that crosses from the C core goes through one function,
:func:`error_for_code`, which maps the C code (csrc/core/fq_common.h) to a class
and keeps the C code name (``.code``, e.g. ``"FQ_E_DECODE"``) and message.
Image-content problems are ``ImageError``s, which are also ``ValueError``s, so
``except ValueError`` keeps working for code written against cv2/PIL-style
loaders; read problems are also ``OSError``s.  Errors about one sample carry
``.index`` (sample index in the source) and ``.path`` (file, when there is one).
"""

__all__ = [
    "FastqError", "ImageError", "DecodeError", "EmptyImageError", "UnsupportedFormatError",
    "ImageTooLargeError", "ReadError", "InvalidArgumentError", "PipelineClosedError",
    "StalledError", "ForkedPipelineError", "SupersededIterationError", "PinMemoryError",
    "error_for_code",
]


class FastqError(RuntimeError):
    """Base class of every fastq error.  ``code``: C code name or None;
    ``index``/``path``: the sample concerned, when known.  ``str()`` names the
    file when ``path`` is set and the message does not already name it (TF
    keeps only the message when it turns the exception into an OpError)."""

    def __init__(self, message="", code=None, index=None, path=None):
        super().__init__(message)
        self.code = code
        self.index = index
        self.path = path

    def __str__(self):
        msg = super().__str__()
        if self.path and self.path not in msg:
            return f"{msg} (file: {self.path})"
        return msg


class ImageError(FastqError, ValueError):
    """A sample's image could not be turned into an output row."""


class DecodeError(ImageError):
    """Corrupt, truncated or unrecognized image data (FQ_E_DECODE)."""


class EmptyImageError(ImageError):
    """Empty input: a 0-byte file or buffer, or a 0-sized array (FQ_E_EMPTY)."""


class UnsupportedFormatError(ImageError):
    """A recognized format or layout fastq does not handle (FQ_E_UNSUPPORTED)."""


class ImageTooLargeError(ImageError):
    """The image declares more pixels than max_pixels (FQ_E_TOO_LARGE)."""


class ReadError(FastqError, OSError):
    """A file could not be opened or read (FQ_E_IO)."""


class InvalidArgumentError(FastqError, ValueError):
    """A bad argument or parameter reached the C core (FQ_E_INVALID)."""


class PipelineClosedError(FastqError):
    """The pipeline was closed (or the interpreter is exiting) (FQ_E_CLOSED)."""


class StalledError(FastqError):
    """The consumer holds the batch slots the producers need (FQ_E_STALLED)."""


class ForkedPipelineError(FastqError):
    """A pipeline was used in a process forked after it was created."""


class SupersededIterationError(FastqError):
    """An epoch iterator was used after a newer iteration of the same
    pipeline began (its run was cancelled, FQ_E_CANCELLED)."""


class PinMemoryError(FastqError):
    """pin_memory=True was requested but the slot memory could not be pinned."""


# C code (see csrc/core/fq_common.h) -> class.  Codes not listed map to FastqError.
_BY_CODE = {
    1: MemoryError,           # FQ_E_NOMEM
    2: InvalidArgumentError,  # FQ_E_INVALID
    3: TimeoutError,          # FQ_E_TIMEOUT
    4: PipelineClosedError,   # FQ_E_CLOSED
    5: SupersededIterationError,  # FQ_E_CANCELLED
    6: ReadError,             # FQ_E_IO
    7: EmptyImageError,       # FQ_E_EMPTY
    8: DecodeError,           # FQ_E_DECODE
    9: UnsupportedFormatError,  # FQ_E_UNSUPPORTED
    10: ImageTooLargeError,   # FQ_E_TOO_LARGE
    12: StalledError,         # FQ_E_STALLED
    13: OSError,              # FQ_E_SYS
}

_NAMES = {
    1: "FQ_E_NOMEM", 2: "FQ_E_INVALID", 3: "FQ_E_TIMEOUT", 4: "FQ_E_CLOSED",
    5: "FQ_E_CANCELLED", 6: "FQ_E_IO", 7: "FQ_E_EMPTY", 8: "FQ_E_DECODE",
    9: "FQ_E_UNSUPPORTED", 10: "FQ_E_TOO_LARGE", 11: "FQ_E_SOURCE", 12: "FQ_E_STALLED",
    13: "FQ_E_SYS", 14: "FQ_E_EOF",
}


def error_for_code(code, message, index=None, path=None):
    """Build (not raise) the exception for a C error ``code`` with ``message``."""
    cls = _BY_CODE.get(code, FastqError)
    name = _NAMES.get(code, f"FQ_E_{code}")
    if not issubclass(cls, FastqError):  # MemoryError, TimeoutError, OSError: same fields
        exc = cls(message)
        exc.code, exc.index, exc.path = name, index, path
        return exc
    return cls(message, name, index=index, path=path)
