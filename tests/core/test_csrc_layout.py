"""The tree shows the design, and these checks keep it that way (docs/architecture.md,
"Layers"): csrc/ is one folder per component, includes name the component and point
one way, a folder's internal/ headers stay inside it, setup.py finds sources by folder,
no C/C++ file passes 600 lines, and every `cdef extern` block lives in
fastq/_native/includes/ (one .pxd per header)."""
import ast
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = os.path.join(ROOT, "csrc")

# component -> the components its files may include (besides itself)
ALLOWED = {
    "core": set(),
    "ring": {"core"},
    "image": {"core"},
    "task": {"core", "image"},
    "records": {"core", "task/fq_sample_reader.h"},
    "cuda": {"core"},
    "net": {"core"},
}


def _sources(component):
    """Every C/C++ file of a component: its folder, internal/ and its stage sub-folders
    (csrc/image/decode/, geometry/, ...)."""
    d = os.path.join(CSRC, component)
    return sorted(glob.glob(os.path.join(d, "*.[ch]")) + glob.glob(os.path.join(d, "*.cpp"))
                  + glob.glob(os.path.join(d, "*", "*.[ch]")) + glob.glob(os.path.join(d, "*", "*.cpp")))


def _includes(path):
    with open(path, encoding="utf-8") as f:
        return re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), re.M)


def _setup_components():
    """CSRC_COMPONENTS and CSRC_NOT_BUILT, read from setup.py's source (not imported:
    importing it runs setup())."""
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("CSRC_COMPONENTS", "CSRC_NOT_BUILT"):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["CSRC_COMPONENTS"], found["CSRC_NOT_BUILT"]


def test_every_csrc_folder_is_a_component_or_named_as_not_built():
    components, not_built = _setup_components()
    assert set(components) == set(ALLOWED)
    folders = {d for d in os.listdir(CSRC) if os.path.isdir(os.path.join(CSRC, d))}
    assert folders <= set(components) | not_built, sorted(folders - set(components) - not_built)
    assert "tf" in not_built  # the TensorFlow kernel is built apart, never into the extensions
    assert not [f for f in os.listdir(CSRC) if os.path.isfile(os.path.join(CSRC, f))], "files directly in csrc/"


def test_setup_py_lists_no_source_file():
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        text = f.read()
    # (the test-only fq_testtask.c of fastq._native._testing is named: csrc/tests is not a component)
    assert not [f for f in re.findall(r'"csrc/([\w/]+\.(?:c|cpp))"', text) if not f.startswith("tests/")]


@pytest.mark.parametrize("component", sorted(ALLOWED))
def test_includes_point_one_way(component):
    bad = []
    for path in _sources(component):
        for inc in _includes(path):
            head = inc.split("/")[0]
            if "/" not in inc:
                bad.append((path, inc, "an include names its component"))
            elif head == component:
                if "/internal/" in inc and not inc.startswith(component + "/internal/"):
                    bad.append((path, inc, "internal"))
            elif "/internal/" in inc:
                bad.append((path, inc, "another component's internal header"))
            elif head not in ALLOWED[component] and inc not in ALLOWED[component]:
                bad.append((path, inc, f"{component} may include {sorted(ALLOWED[component])}"))
    assert not bad, bad


def test_sources_sit_where_setup_py_finds_them():
    """setup.py builds a component from its folder and its stage sub-folders, one level
    deep: no source deeper, none in internal/ (headers only), no empty stage."""
    for component in ALLOWED:
        d = os.path.join(CSRC, component)
        deep = [p for p in glob.glob(os.path.join(d, "**", "*"), recursive=True)
                if os.path.isfile(p) and os.path.relpath(p, d).count(os.sep) > 1]
        assert not deep, deep
        assert not glob.glob(os.path.join(d, "internal", "*.c*")), component
        for stage in os.listdir(d):
            if os.path.isdir(os.path.join(d, stage)) and stage != "internal":
                assert glob.glob(os.path.join(d, stage, "*.c")) + glob.glob(os.path.join(d, stage, "*.cpp")), stage
    stages = {s for s in os.listdir(os.path.join(CSRC, "image")) if os.path.isdir(os.path.join(CSRC, "image", s))}
    assert stages == {"internal", "decode", "geometry", "color", "targets", "batch", "api"}, stages
    assert not glob.glob(os.path.join(CSRC, "image", "*.cpp")), "image sources sit in a stage folder"


def test_a_stage_header_is_included_only_by_its_stage():
    """A header in a stage folder (csrc/image/color/fq_image_aug_tensorpack.h) is private to that
    stage; what several stages share is in internal/, what other components include at
    the component's top."""
    bad = []
    for path in glob.glob(os.path.join(CSRC, "**", "*.[ch]"), recursive=True) + \
            glob.glob(os.path.join(CSRC, "**", "*.cpp"), recursive=True) + glob.glob(os.path.join(CSRC, "**", "*.cc"),
                                                                                   recursive=True):
        rel = os.path.relpath(path, CSRC).split(os.sep)
        for inc in _includes(path):
            parts = inc.split("/")
            if len(parts) == 3 and parts[1] != "internal" and parts[:2] != rel[:2]:
                bad.append((os.path.relpath(path, ROOT), inc))
    assert not bad, bad


def test_no_c_file_over_600_lines():
    long = {}
    for path in glob.glob(os.path.join(CSRC, "**", "*.[ch]"), recursive=True) + \
            glob.glob(os.path.join(CSRC, "**", "*.cpp"), recursive=True):
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > 600:
            long[os.path.relpath(path, ROOT)] = n
    assert not long, long


def test_extern_blocks_live_in_fastq_includes():
    native = os.path.join(ROOT, "fastq", "_native")
    cython = glob.glob(os.path.join(native, "*.pyx")) + glob.glob(os.path.join(native, "*.pxi")) + \
        glob.glob(os.path.join(native, "*.pxd")) + glob.glob(os.path.join(ROOT, "tests", "native", "*.pyx"))
    assert len(cython) > 10, cython
    for path in cython:
        with open(path, encoding="utf-8") as f:
            assert "cdef extern" not in f.read(), path
    headers = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "fastq", "_native", "includes", "*.pxd"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        externs = re.findall(r'^cdef extern from "([^"]+)"', text, re.M)
        if os.path.basename(path) == "__init__.pxd":
            assert not externs
            continue
        # one header per .pxd, named after it, and nothing but declarations
        assert len(externs) == 1, (path, externs)
        if not externs[0].startswith("numpy/"):  # numpy_array.pxd: numpy/arrayobject.h
            assert os.path.basename(externs[0]).split(".")[0] == os.path.basename(path)[:-4], (path, externs)
        assert not re.search(r"^(def|cdef class|class)\b", text, re.M), path
        headers[externs[0]] = path
    for h in headers:
        if not h.startswith("numpy/"):
            assert os.path.isfile(os.path.join(CSRC, h)), h
