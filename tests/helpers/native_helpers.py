"""The test-only native module ``fastq._native._testing`` (tests/native/_testing.pyx).

setup.py builds it only when FASTQ_TESTING=1, so that the wheel never ships it;
importing it through here turns a missing build into an error that says how
to build it.
"""
try:
    from fastq._native import _testing
except ImportError as e:  # pragma: no cover - depends on how fastq was built
    raise ImportError(
        "fastq._native._testing is not built (it is a test-only module): run "
        "`FASTQ_TESTING=1 python3 setup.py build_ext --inplace` in the checkout "
        "(scripts/setup.sh does this)") from e

PatternTask = _testing.PatternTask
block_address = _testing.block_address
write_row = _testing.write_row


def slot_addresses(p, block=0):
    """Where `block` starts in every slot of pipeline `p`'s ring: a batch (or a
    TF tensor) whose data pointer is one of these aliases slot memory."""
    return _testing.slot_addresses(p._state.ring, block)
