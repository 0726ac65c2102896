"""fastq.tfrecord_codec, the one pure-Python tf.train.Example encoder / parser and TFRecord
framer, against TensorFlow's own: tf.train.Example, tf.io.parse_single_example,
tf.io.TFRecordWriter and tf.data.TFRecordDataset."""
import numpy as np
import pytest

import tensorflow as tf

from fastq.tfrecord_codec import encode_example, parse_example, tfrecord_frame

pytestmark = pytest.mark.tf

FEATURES = {"image/encoded": b"\xff\xd8\xff\x00binary\x00", "image/format": b"JPEG", "image/class/label": 7,
            "image/height": 300, "image/width": 2 ** 40, "neg": -5, "ids": [1, -2, 3, 2 ** 62],
            "names": [b"a", b"", b"ccc"]}


def _tf_example(features):
    def feat(v):
        vals = v if isinstance(v, list) else [v]
        if vals and isinstance(vals[0], bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=vals))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=vals))
    return tf.train.Example(features=tf.train.Features(feature={k: feat(v) for k, v in features.items()}))


def test_encoded_example_equals_tensorflows():
    ref = _tf_example(FEATURES)
    assert tf.train.Example.FromString(encode_example(FEATURES)) == ref
    assert encode_example(FEATURES) == ref.SerializeToString(deterministic=True)


def test_encoded_example_parses_with_parse_single_example():
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64),
            "ids": tf.io.FixedLenFeature([4], tf.int64),
            "names": tf.io.VarLenFeature(tf.string),
            "neg": tf.io.FixedLenFeature([], tf.int64)}
    ex = tf.io.parse_single_example(encode_example(FEATURES), spec)
    assert ex["image/encoded"].numpy() == FEATURES["image/encoded"]
    assert int(ex["image/class/label"]) == 7 and int(ex["neg"]) == -5
    assert ex["ids"].numpy().tolist() == FEATURES["ids"]
    assert tf.sparse.to_dense(ex["names"]).numpy().tolist() == FEATURES["names"]


def test_parse_example_reads_what_tensorflow_writes():
    ex = tf.train.Example(features=tf.train.Features(feature={
        "img": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"\x00\x01x", b"y"])),
        "lab": tf.train.Feature(int64_list=tf.train.Int64List(value=[-1, 0, 2 ** 63 - 1])),
        "box": tf.train.Feature(float_list=tf.train.FloatList(value=[0.25, -1.5, 3e-8])),
        "one_float": tf.train.Feature(float_list=tf.train.FloatList(value=[0.1])),
        "other": tf.train.Feature(int64_list=tf.train.Int64List(value=[9]))}))
    got = parse_example(ex.SerializeToString(), {"img", "lab", "box", "one_float", "missing"})
    assert got["img"] == [b"\x00\x01x", b"y"]
    assert got["lab"] == [-1, 0, 2 ** 63 - 1]
    np.testing.assert_array_equal(np.float32(got["box"]), np.float32([0.25, -1.5, 3e-8]))
    np.testing.assert_array_equal(np.float32(got["one_float"]), np.float32([0.1]))
    assert "other" not in got and "missing" not in got  # only the keys asked for, and only those present
    assert parse_example(encode_example(FEATURES), set(FEATURES)) == \
        {k: v if isinstance(v, list) else [v] for k, v in FEATURES.items()}


def test_parse_example_refuses_a_truncated_message():
    data = encode_example(FEATURES)
    with pytest.raises((ValueError, IndexError)):
        parse_example(data[:len(data) // 2], {"image/encoded"})


def test_frames_equal_tfrecordwriters_and_read_back(tmp_path):
    records = [encode_example(FEATURES), b"", b"x" * 1000]
    ref = str(tmp_path / "ref.tfrecord")
    with tf.io.TFRecordWriter(ref) as w:
        for r in records:
            w.write(r)
    ours = str(tmp_path / "ours.tfrecord")
    with open(ours, "wb") as f:
        f.writelines(tfrecord_frame(r) for r in records)
    assert open(ref, "rb").read() == open(ours, "rb").read()
    assert [r.numpy() for r in tf.data.TFRecordDataset(ours)] == records  # TF checks both CRCs
