"""docs/ops.md and docs/targets.md say what the C op records say about targets.

Each op's target rule is part of its record in C (FQ_RULE_PIXEL, a geometric FQ_RULE_*,
FQ_RULE_REFUSED), read here through the bindings (fastq.targets.rule).  docs/ops.md
marks every pixel-only op *pixel-only* in the first cell of its table row, and no other;
the rule table of docs/targets.md ("Rules per op") names every op with a geometric rule,
and no op of another rule.  A new pixel-only op therefore needs its mark in ops.md and
nothing in targets.md; every op has an entry in ops.md.
"""
import os
import re

from fastq import targets as T
from fastq._native import _image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARK = "*pixel-only*"


def _read(name):
    with open(os.path.join(ROOT, "docs", name), encoding="utf-8") as f:
        return f.read()


def _rules():
    return {name: T.rule(name) for name in _image.OP_KINDS}


def _first_cells(text):
    """The first cell of every table row (not the separator rows)."""
    return [line.split("|")[1] for line in text.split("\n") if line.startswith("|") and not line.startswith("|---")]


def _ops_in(cell, known, bare=False):
    """The op names a first cell names: `Name(...)` or `Name` in code spans (ops.md), or
    also bare words (the rule table of targets.md)."""
    words = re.findall(r"[A-Za-z]\w*", cell) if bare else re.findall(r"`([A-Za-z]\w*)[(`]", cell)
    return {w for w in words if w in known}


def test_every_op_has_an_entry_in_ops_md():
    rules = _rules()
    named = set()
    for cell in _first_cells(_read("ops.md")):
        named |= _ops_in(cell, rules)
    # the three torchvision policies are described in prose (one section, their ops' table)
    text = _read("ops.md")
    prose = {n for n in rules if re.search(r"`%s\(" % n, text)}
    assert set(rules) <= named | prose, sorted(set(rules) - named - prose)


def test_the_pixel_only_marks_of_ops_md_are_the_c_rules():
    rules = _rules()
    marked, unmarked = set(), set()
    for cell in _first_cells(_read("ops.md")):
        names = _ops_in(cell.split("*")[0], rules)
        (marked if MARK in cell else unmarked).update(names)
    pixel = {n for n, r in rules.items() if r == "pixel"}
    assert marked == pixel, {"marked, not pixel-only in C": sorted(marked - pixel),
                             "pixel-only in C, not marked": sorted(pixel - marked)}
    assert not (unmarked & pixel), sorted(unmarked & pixel)
    assert len(pixel) >= 22


def test_the_rule_table_of_targets_md_names_the_geometric_ops():
    rules = _rules()
    text = _read("targets.md")
    table = text[text.index("## Rules per op"):]
    table = table[:table.index("\n\n", table.index("| Op |"))]
    named = set()
    for line in table.split("\n"):
        if line.startswith("| ") and not line.startswith("| Op |"):
            cells = line.split("|")
            names = _ops_in(cells[1], rules, bare=True)
            if cells[2].strip() == "refused":  # the row of every other op: examples of refused ones
                assert names and all(rules[n] == "refused" for n in names), line
            else:
                named |= names
    geometric = {n for n, r in rules.items() if r == "geometric"}
    assert named == geometric, {"in the table, not geometric": sorted(named - geometric),
                                "geometric, not in the table": sorted(geometric - named)}


def test_the_checks_see_a_wrong_mark():
    rules = _rules()
    cells = _first_cells("| op | what |\n|---|---|\n| `Invert(p)` | x |\n| `Rotate(angle)` *pixel-only* | y |\n"
                         "| Invert float32 | tolerance |\n")
    marked = {n for c in cells if MARK in c for n in _ops_in(c.split("*")[0], rules)}
    assert marked == {"Rotate"} and rules["Rotate"] == "geometric" and rules["Invert"] == "pixel"
