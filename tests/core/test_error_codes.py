"""The error-code table exists once in C (``enum fq_code`` in csrc/core/fq_common.h) and
is repeated by hand in Python (the tables behind fastq.errors.error_for_code, the
``_core.pxd`` declarations, ``fq_code_name`` in fq_common.c).  These tests parse
the C header and fail on any drift: a code added, renumbered or renamed in C
without its Python side, or a Python entry for a code C does not have.
"""
import os
import re
import shutil
import subprocess

import pytest

from fastq._native import _core
from fastq import errors

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = os.path.join(ROOT, "csrc")

# Codes that deliberately have no exception class of their own:
#   FQ_OK  - success;
#   FQ_E_EOF - "no more batches", consumed by the ring bindings, never raised;
#   FQ_E_SOURCE - the user's own exception from a Python source is re-raised
#                 as is (sources._PythonBackend.sample_error); the FastqError
#                 fallback only applies if that exception was lost.
NO_CLASS = {"FQ_OK", "FQ_E_EOF", "FQ_E_SOURCE"}


def _read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def c_enum():
    """{name: value} of ``enum fq_code``, parsed from the header text."""
    text = _read("csrc", "core", "fq_common.h")
    m = re.search(r"enum\s+fq_code\s*\{(.*?)\};", text, re.S)
    assert m, "enum fq_code not found in csrc/core/fq_common.h"
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    body = re.sub(r"//[^\n]*", "", body)
    out = {}
    nxt = 0
    for entry in (e.strip() for e in body.split(",")):
        if not entry:
            continue
        em = re.fullmatch(r"(FQ_\w+)(?:\s*=\s*(\d+))?", entry)
        assert em, f"cannot parse enum entry {entry!r}"
        value = int(em.group(2)) if em.group(2) is not None else nxt
        assert em.group(1) not in out, f"duplicate enum name {em.group(1)}"
        out[em.group(1)] = value
        nxt = value + 1
    assert len(set(out.values())) == len(out), f"two codes share a value: {out}"
    return out


def test_the_header_parses_to_a_dense_table():
    codes = c_enum()
    assert codes["FQ_OK"] == 0
    assert sorted(codes.values()) == list(range(len(codes))), codes


def test_every_code_keeps_its_c_name():
    codes = c_enum()
    for name, value in codes.items():
        if name == "FQ_OK":
            continue
        exc = errors.error_for_code(value, "msg", index=3, path="p")
        if isinstance(exc, errors.FastqError):
            assert (exc.code, exc.index, exc.path) == (name, 3, "p")


def test_every_error_code_has_exactly_one_exception_class():
    codes = c_enum()
    cls_of = {name: type(errors.error_for_code(v, "msg")) for name, v in codes.items() if name != "FQ_OK"}
    without = {name for name, cls in cls_of.items() if cls is errors.FastqError}
    assert without == NO_CLASS - {"FQ_OK"}, (
        f"codes that fall back to the FastqError base: {sorted(without)}; every C code except "
        f"{sorted(NO_CLASS)} needs its own class in fastq/errors.py")
    mapped = [cls for name, cls in cls_of.items() if name not in NO_CLASS]
    assert len(set(mapped)) == len(mapped), f"two codes map to the same exception class: {cls_of}"
    for name, cls in cls_of.items():
        exc = errors.error_for_code(codes[name], "msg")
        assert str(exc) == "msg"
        if name not in NO_CLASS and issubclass(cls, errors.FastqError):
            # the class documents the code it stands for
            assert re.search(rf"\b{name}\b", cls.__doc__ or ""), (cls.__name__, name)


def test_classes_named_after_a_code_in_their_docstring_are_the_ones_mapped_from_it():
    codes = c_enum()
    for cls in vars(errors).values():
        if isinstance(cls, type) and issubclass(cls, errors.FastqError) and cls.__doc__:
            for name in re.findall(r"\b(FQ_E_\w+)\b", cls.__doc__):
                assert name in codes, f"{cls.__name__} documents unknown code {name}"
                assert type(errors.error_for_code(codes[name], "")) is cls, (cls.__name__, name)


def test_codes_without_a_class_still_carry_their_name():
    codes = c_enum()
    for name in NO_CLASS - {"FQ_OK"}:
        exc = errors.error_for_code(codes[name], "m")
        assert type(exc) is errors.FastqError and exc.code == name
    exc = errors.error_for_code(max(codes.values()) + 1, "m")
    assert type(exc) is errors.FastqError and exc.code == f"FQ_E_{max(codes.values()) + 1}"


def test_core_codes_are_the_compiled_enum():
    # _core.CODES is built from the enum constants as compiled into the extension
    codes = c_enum()
    want = {re.sub(r"^FQ_(E_)?", "", k): v for k, v in codes.items()}
    assert _core.CODES == want


def test_pxd_declares_every_code_and_the_message_length():
    codes = c_enum()
    pxd = _read("fastq", "_native", "includes", "fq_common.pxd")
    m = re.search(r'cdef extern from "core/fq_common.h" nogil:\s*\n\s*enum:\s*\n((?:\s+\w+\n)+)', pxd)
    assert m, "enum block of fq_common.h not found in fastq/_native/includes/fq_common.pxd"
    declared = set(m.group(1).split())
    assert set(codes) <= declared, f"missing in includes/fq_common.pxd: {sorted(set(codes) - declared)}"
    header = _read("csrc", "core", "fq_common.h")
    msg_len = int(re.search(r"#define\s+FQ_ERR_MSG_LEN\s+(\d+)", header).group(1))
    # a struct with a message buffer of its own size names that size's macro (csrc/net/fq_http.h:
    # FQ_HTTP_MSG_LEN), so the pxd cannot drift from the header
    own = set()
    for d, _, files in os.walk(os.path.join(ROOT, "csrc")):
        for f in files:
            if f.endswith(".h"):
                own |= set(re.findall(r"#define\s+(FQ_\w*MSG_LEN)\s+\d+", _read(os.path.relpath(d, ROOT), f)))
    for pxd_name in sorted(os.listdir(os.path.join(ROOT, "fastq", "_native", "includes"))):
        for n in re.findall(r"char msg\[(\w+)\]", _read("fastq", "_native", "includes", pxd_name)):
            assert n in ("FQ_ERR_MSG_LEN", str(msg_len)) or n in own, (pxd_name, n)


def test_python_code_only_names_existing_codes():
    # e.g. _core.CODES["SOURCE"] in fastq/sources/iterable.py; a typo would be a
    # KeyError at the worst moment (while reporting another error).
    used = set()
    for d, _, files in os.walk(os.path.join(ROOT, "fastq")):
        for f in files:
            if f.endswith((".py", ".pyx", ".pxi")):
                used |= set(re.findall(r'CODES\[["\'](\w+)["\']\]', _read(os.path.relpath(d, ROOT), f)))
    assert used, "expected at least one CODES[...] use (fastq/sources/)"
    assert used <= set(_core.CODES), sorted(used - set(_core.CODES))


_CODE_NAME_C = r"""
#include <stdio.h>
#include "core/fq_common.h"
#include "task/fq_imgtask.h"
int main(void)
{
    printf("%d\n", FQ_IMGTASK_MAX_CODES);
    for (int c = -1; c <= 20; c++)
        printf("%d %s\n", c, fq_code_name(c));
    return 0;
}
"""


def test_fq_code_name_and_the_skip_counters_cover_every_code(tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    assert cc, "a C compiler is needed (the same one that builds fastq)"
    (tmp_path / "names.c").write_text(_CODE_NAME_C)
    exe = tmp_path / "names"
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", CSRC, str(tmp_path / "names.c"),
                    os.path.join(CSRC, "core", "fq_common.c"), "-o", str(exe)], check=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    max_codes = int(lines[0])
    names = dict(line.split() for line in lines[1:] if line)
    codes = c_enum()
    for name, value in codes.items():
        assert names[str(value)] == name
    for value in set(range(-1, 21)) - set(codes.values()):
        assert names[str(value)] == "FQ_E_UNKNOWN"
    # ImageTask counts skipped samples per code in an array of FQ_IMGTASK_MAX_CODES
    assert max(codes.values()) < max_codes


@pytest.mark.parametrize("module", ["_core.pyx", "_image.pyx", "_cuda.pyx"])
def test_extensions_build_exceptions_only_through_error_for_code(module):
    # No extension module picks an exception class for a C code by itself: _core
    # defines the one raise helper (over error_for_code), the others cimport it.
    text = _read("fastq", "_native", module)
    if module == "_core.pyx":
        assert "cdef int raise_fq_error(" in text and "error_for_code(" in text
    else:
        assert "from fastq._native._core cimport" in text and "raise_fq_error" in text
        assert "cdef raise_fq_error" not in text and "cdef int raise_fq_error" not in text
    hardcoded = re.findall(r"raise\s+(?:errors\.|_errors\.)?(\w+Error)\(\s*err\.", text)
    assert not hardcoded, hardcoded
