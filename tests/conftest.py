import os
import threading

import pytest

# Keep TensorFlow quiet and deterministic-ish in tests that import it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# torchvision 0.29 (torch 2.14) imported AFTER TensorFlow 2.21 in one process crashes
# (SIGSEGV in `import tensorflow; import torchvision.transforms.v2.functional`, with or
# without fastq); the other order works.  Tests import either lazily, in any order, so
# torchvision is loaded here first when it is installed.
try:
    import torchvision.transforms.v2.functional  # noqa: F401,E402
except ImportError:
    pass


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


# -- selecting runs with markers (registered in pyproject.toml) -------------------------
# FASTQ_TESTS_WITHOUT_TF=1 (the cibuildwheel test step for CPython 3.9, which has no
# TensorFlow wheels) runs -m "not tf and not tensorpack", combined with any -m given.
# A test file whose module-level ``pytestmark`` makes every one of its tests fail the
# -m expression is not imported at all (its module-level imports may need the
# framework); the marks are read from the file's syntax tree, never from its code's text.
WITHOUT_TF = os.environ.get("FASTQ_TESTS_WITHOUT_TF") == "1"
WITHOUT_TF_EXPR = "not tf and not tensorpack"


def pytest_configure(config):
    if WITHOUT_TF:
        given = config.option.markexpr
        config.option.markexpr = f"({given}) and {WITHOUT_TF_EXPR}" if given else WITHOUT_TF_EXPR


def module_marks(path):
    """Names of the marks in a test file's module-level ``pytestmark``
    (``pytest.mark.x`` or a list / tuple of them)."""
    import ast
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), str(path))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                for t in node.targets):
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            for v in values:
                while isinstance(v, ast.Call):  # pytest.mark.x(...)
                    v = v.func
                if isinstance(v, ast.Attribute):
                    names.add(v.attr)
    return names


def pytest_ignore_collect(collection_path, config):
    expr = config.option.markexpr
    name = collection_path.name
    if not expr or not (name.startswith("test_") and name.endswith(".py")) or not collection_path.is_file():
        return None
    marks = module_marks(collection_path)
    if not marks:
        return None
    # Ignore the file only if no test in it can be selected: the expression is false
    # for its module marks plus any combination of the other registered markers
    # (a test's own marks add to the module's).
    import itertools
    from _pytest.mark.expression import Expression
    compiled = Expression.compile(expr)
    others = sorted({line.split(":")[0].strip() for line in config.getini("markers")} - marks)
    for k in range(len(others) + 1):
        for extra in itertools.combinations(others, k):
            have = marks | set(extra)
            if compiled.evaluate(lambda m, **kw: m in have):
                return None
    return True
