"""An op is declared once in C (its parameter struct, field list and record in
csrc/image/api/fq_image_ops.cpp) and once in Python (its class in fastq/ops/).
fastq._native._image.pack_ops packs by the C descriptors (fq_img_op_desc); these tests hold the
two declarations together: every op class fills exactly the fields of its C op, with
the shapes the C struct has, and every C op has a class."""
import inspect

import numpy as np
import pytest

from fastq._native import _image
from fastq import ops as O


def _op_classes():
    return {name: cls for name, cls in vars(O).items()
            if inspect.isclass(cls) and issubclass(cls, O.Op) and cls is not O.Op and not name.startswith("_")}


# one instance per op class, found in fastq.ops (a new op needs no line here): the
# class's _example() (fastq/ops/_base.py), with non-default arguments where the class
# has them (CustomOp's library is not loaded before a spec is built)
SAMPLES = {name: cls._example() for name, cls in _op_classes().items()}


def test_every_op_class_that_needs_arguments_has_its_own_example():
    assert len(SAMPLES) >= 56
    for name, cls in _op_classes().items():
        required = [p.name for p in inspect.signature(cls).parameters.values()
                    if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if required:
            assert "_example" in vars(cls), f"{name} needs arguments {required} and has no _example"
        assert type(SAMPLES[name]) is cls


def test_every_c_op_has_a_python_class_and_back():
    assert set(_image.OP_FIELDS) == set(_op_classes()) == set(SAMPLES)
    for name, cls in _op_classes().items():
        assert _image.OP_KINDS[name] == cls.kind


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_python_fields_match_the_c_descriptor(name):
    op = SAMPLES[name]
    assert type(op).__name__ == name
    fields = op.fields()
    want = _image.OP_FIELDS[name]  # {field: shape}, all float64 in C
    assert set(fields) == set(want), (sorted(fields), sorted(want))
    for field, shape in want.items():
        value = np.asarray(fields[field])
        assert value.shape == shape, (field, value.shape, shape)
        assert value.dtype.kind in "biuf", (field, value.dtype)  # numbers, stored as doubles


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_packing_writes_each_field_at_its_c_offset(name):
    # read the packed bytes back at the offsets of the C descriptor (fq_op.raw starts at byte 8)
    op = SAMPLES[name]
    packed = _image.pack_ops([(op.kind, op.fields())])
    raw = packed.tobytes()[8:]
    flat = np.frombuffer(raw, dtype="<f8")
    at = 0
    for field, shape in _image.OP_FIELDS[name].items():
        n = int(np.prod(shape))  # 1 for a scalar
        np.testing.assert_array_equal(flat[at:at + n], np.asarray(op.fields()[field], np.float64).ravel(), field)
        at += n
    assert not flat[at:].any()  # the rest of the union stays zero


def test_field_shapes_are_enforced():
    rc = O.RandomCrop(4).fields()
    with pytest.raises(ValueError, match="RandomCrop: fill: expected 3 values, got 2"):
        _image.pack_ops([(O.K_RANDOM_CROP, dict(rc, fill=(1, 2)))])
    with pytest.raises(ValueError, match="RandomCrop: fill: expected a sequence"):
        _image.pack_ops([(O.K_RANDOM_CROP, dict(rc, fill=3))])
    with pytest.raises(ValueError, match="RandomCrop: out_h: expected a number"):
        _image.pack_ops([(O.K_RANDOM_CROP, dict(rc, out_h="4"))])
    cj = O.ColorJitter(brightness=0.5).fields()
    with pytest.raises(ValueError, match="ColorJitter: range: expected 2 values, got 3"):
        _image.pack_ops([(O.K_COLOR_JITTER, dict(cj, range=((0, 1, 2),) * 4))])
    with pytest.raises(ValueError, match=r"Resize: missing parameters \['interp'\]"):
        _image.pack_ops([(O.K_RESIZE, {"out_h": 1, "out_w": 1, "shorter_side": 0})])
