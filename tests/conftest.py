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
