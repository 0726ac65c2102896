"""A cache fill's outcome handed to the event loops that wait on it (fastq/sources/fetch.py:
_on_loop): each loop gets the result, or its own copy of the failure."""
import asyncio
import concurrent.futures
import threading

import pytest

from fastq.sources.fetch import _on_loop
from fastq.sources.storage import RemoteError


def _wait_on_loops(cf, n):
    """Await cf from n event loops, each in a thread of its own; what each one got."""
    got, ready = [None] * n, threading.Barrier(n + 1)

    def run(i):
        async def main():
            fut = _on_loop(cf, asyncio.get_running_loop())
            ready.wait()
            try:
                got[i] = ("ok", await fut)
            except Exception as e:  # noqa: BLE001
                got[i] = ("err", e)
        asyncio.run(main())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return got, ready, threads


def test_each_loop_gets_its_own_copy_of_a_failed_fill():
    cf = concurrent.futures.Future()
    got, ready, threads = _wait_on_loops(cf, 3)
    ready.wait()
    fail = RemoteError("s3://b/k", "GET", "HTTP 503", transient=True, status=503)
    cf.set_exception(fail)
    for t in threads:
        t.join(10)
    assert all(kind == "err" for kind, _ in got), got
    errs = [e for _, e in got]
    assert len({id(e) for e in errs}) == 3 and all(e is not fail for e in errs)
    for e in errs:  # the same failure: type, message, attributes, and the original as its cause
        assert type(e) is RemoteError and str(e) == str(fail) and e.__dict__ == fail.__dict__
        assert e.__cause__ is fail and e.__traceback__ is not None
    assert fail.__traceback__ is None  # never raised itself


def test_a_fill_result_is_shared():
    cf = concurrent.futures.Future()
    got, ready, threads = _wait_on_loops(cf, 2)
    ready.wait()
    data = memoryview(b"bytes of the object")
    cf.set_result(data)
    for t in threads:
        t.join(10)
    assert [g for g in got] == [("ok", data), ("ok", data)] and got[0][1] is data


@pytest.mark.parametrize("exc", [OSError(5, "I/O error"), ValueError("v")])
def test_other_exceptions_are_copied_too(exc):
    cf = concurrent.futures.Future()
    got, ready, threads = _wait_on_loops(cf, 1)
    ready.wait()
    cf.set_exception(exc)
    for t in threads:
        t.join(10)
    (kind, e), = got
    assert kind == "err" and type(e) is type(exc) and e.args == exc.args and e is not exc and str(e) == str(exc)
    if isinstance(exc, OSError):
        assert (e.errno, e.strerror) == (exc.errno, exc.strerror)
