"""fastq.sources.Folder: the class-per-subfolder tree, checked against Keras'
image_dataset_from_directory listing and a hand-written reference listing, and
against the Files source on the same paths/seed."""
import os
import shutil

import numpy as np
import pytest

import fastq
from fastq import errors, ops
from fastq.bench import testdata

CHAIN = [ops.RandomResizedCrop(48), ops.HorizontalFlip(), ops.Normalize(ops.IMAGENET_MEAN, ops.IMAGENET_STD)]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """root/{zebra,Apple,cat,cat.d}/...: mixed case, a nested subfolder, a dotted
    class name, upper-case extensions, non-image files and a file in root."""
    root = tmp_path_factory.mktemp("tree")
    jpegs = testdata.make_jpeg_dataset(str(tmp_path_factory.mktemp("src")), 14, seed=5, min_side=64, max_side=120)
    layout = {
        "zebra": ["b.jpg", "a.JPG", "c.jpeg"],
        "Apple": ["x.jpg", "notes.txt"],
        "cat": ["2.jpg", "10.jpg", "sub/1.jpg", "sub/deeper/0.jpg", "sub.jpg"],
        "cat.d": ["q.jpg", "r.png.txt"],
        "empty": [],
    }
    k = 0
    for cls, files in layout.items():
        os.makedirs(root / cls, exist_ok=True)
        for f in files:
            p = root / cls / f
            os.makedirs(p.parent, exist_ok=True)
            if f.endswith(".txt"):
                p.write_text("not an image")
            else:
                shutil.copy(jpegs[k], p)
                k += 1
    shutil.copy(jpegs[k], root / "stray.jpg")
    return str(root)


def reference_listing(root, exts=(".jpg", ".jpeg", ".png")):
    """Independent reference: torchvision's make_dataset rule, written out."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    paths, labels = [], []
    for k, c in enumerate(classes):
        for r, _, fnames in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            for f in sorted(fnames):
                if f.lower().endswith(exts):
                    paths.append(os.path.join(r, f))
                    labels.append(k)
    return classes, paths, labels


def test_listing_matches_reference_rule(tree):
    src = fastq.sources.Folder(tree, extensions=("jpg", "jpeg", "png"))
    classes, paths, labels = reference_listing(tree)
    assert src.class_names == classes == ["Apple", "cat", "cat.d", "empty", "zebra"]
    assert src.paths == paths
    assert src.labels.tolist() == labels
    assert len(src) == len(paths) == 10
    assert all(p.startswith(tree) for p in src.paths)
    assert not any(p.endswith(".txt") or p.endswith("stray.jpg") for p in src.paths)


@pytest.mark.tf
def test_listing_matches_keras(tree):
    import keras
    ds = keras.utils.image_dataset_from_directory(tree, labels="inferred", shuffle=False, batch_size=None,
                                                  image_size=(32, 32))
    src = fastq.sources.Folder(tree, extensions=(".jpg", ".jpeg", ".png", ".bmp", ".gif"))
    assert src.class_names == ds.class_names
    assert src.paths == list(ds.file_paths)
    keras_labels = [int(lbl) for _, lbl in ds.as_numpy_iterator()]
    assert src.labels.tolist() == keras_labels


def test_explicit_class_names(tree):
    src = fastq.sources.Folder(tree, class_names=["zebra", "Apple"])
    assert src.class_names == ["zebra", "Apple"]
    assert src.labels.tolist() == [0, 0, 0, 1]
    assert [os.path.basename(p) for p in src.paths] == ["a.JPG", "b.jpg", "c.jpeg", "x.jpg"]
    with pytest.raises(ValueError, match="not subfolders"):
        fastq.sources.Folder(tree, class_names=["zebra", "nope"])
    with pytest.raises(ValueError, match="duplicates"):
        fastq.sources.Folder(tree, class_names=["zebra", "zebra"])


def test_bad_roots(tmp_path):
    with pytest.raises(FileNotFoundError):
        fastq.sources.Folder(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="no class subfolders"):
        fastq.sources.Folder(str(tmp_path))
    os.makedirs(tmp_path / "a")
    (tmp_path / "a" / "x.txt").write_text("x")
    with pytest.raises(ValueError, match="no files"):
        fastq.sources.Folder(str(tmp_path))


def batches(src, batch_size=4, **kw):
    with fastq.Pipeline(src, ops=CHAIN, batch_size=batch_size, **kw) as p:
        return [tuple(np.array(a) for a in b) for b in p]


def test_same_batches_as_files_with_same_seed(tree):
    folder = fastq.sources.Folder(tree)
    files = fastq.sources.Files(folder.paths, labels=folder.labels)
    for workers in (1, 3):
        a = batches(folder, seed=7, shuffle=True, workers=workers)
        b = batches(files, seed=7, shuffle=True, workers=2)
        assert len(a) == len(b) == len(folder) // 4 == 2
        for x, y in zip(a, b):
            for u, v in zip(x, y):
                assert u.tobytes() == v.tobytes()


def test_shards_disjoint_and_covering(tree):
    src = fastq.sources.Folder(tree)
    seen = []
    for i in range(3):
        sh = src.shard(3, i)
        assert sh.class_names == src.class_names
        out = batches(sh, seed=1, return_index=True, batch_size=2, drop_remainder=False)
        idx = np.concatenate([b[2] for b in out])
        lab = np.concatenate([b[1] for b in out])
        np.testing.assert_array_equal(lab, src.labels[idx])
        seen += idx.tolist()
    assert sorted(seen) == list(range(len(src)))


def test_unreadable_file_follows_on_error(tree, tmp_path):
    root = tmp_path / "r"
    shutil.copytree(tree, root)
    bad = root / "cat" / "zz_broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg")
    src = fastq.sources.Folder(str(root))
    with pytest.raises(errors.FastqError) as ei:
        batches(src, seed=0, drop_remainder=False)
    assert "zz_broken.jpg" in str(ei.value)
    assert getattr(ei.value, "path", "").endswith("zz_broken.jpg")
    with fastq.Pipeline(src, ops=CHAIN, batch_size=4, on_error="skip", drop_remainder=False) as p:
        n = sum(len(b[0]) for b in p)
        st = p.stats()
    assert n == len(src)
    assert st["skipped"] == 1
