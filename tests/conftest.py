import os
import threading

import pytest

# Keep TensorFlow quiet and deterministic-ish in tests that import it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def native_thread_count():
    """Threads of this process as the kernel sees them (native + Python)."""
    return len(os.listdir("/proc/self/task"))


@pytest.fixture
def no_leaked_threads():
    """Fails the test if it leaves extra native or Python threads behind."""
    before_native = native_thread_count()
    before_py = {t.ident for t in threading.enumerate()}
    yield
    import time
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        extra_py = [t for t in threading.enumerate() if t.ident not in before_py and t.is_alive()]
        if native_thread_count() <= before_native and not extra_py:
            return
        time.sleep(0.02)
    raise AssertionError(f"threads leaked: native {native_thread_count()} > {before_native}, "
                         f"python {[t.name for t in extra_py]}")


# -- CPython 3.9 (no TensorFlow wheels): FASTQ_TESTS_WITHOUT_TF=1 ---------------------
# The cibuildwheel test step for cp39 sets it: the test files that import TensorFlow,
# tensorpack or Keras at module level are not collected, and the tests whose own code
# uses them are deselected (pytest reports how many).  Nothing is left out otherwise.
_TF_WORDS = ("tensorflow", "tensorpack", "keras", "fastq.tf", "fqtf")
WITHOUT_TF = os.environ.get("FASTQ_TESTS_WITHOUT_TF") == "1"
collect_ignore = []
if WITHOUT_TF:
    import re as _re
    _here = os.path.dirname(os.path.abspath(__file__))
    _module_level = _re.compile(r"^(import|from) (tensorflow|tensorpack|keras)\b|^import fastq\.tf\b|"
                                r"^from fastq(\.tf| import tf)\b|^from fastq\.tensorpack\b", _re.M)
    for _f in sorted(os.listdir(_here)):
        if _f.startswith("test_") and _f.endswith(".py"):
            with open(os.path.join(_here, _f), encoding="utf-8") as _fh:
                if _module_level.search(_fh.read()):
                    collect_ignore.append(_f)


def pytest_collection_modifyitems(config, items):
    if not WITHOUT_TF:
        return
    import inspect
    keep, drop = [], []
    for item in items:
        try:
            src = inspect.getsource(item.function)
        except (OSError, TypeError, AttributeError):
            src = ""
        (drop if any(w in src for w in _TF_WORDS) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
