"""Independent references for masks resampled at pixel centres (tests/targets/test_mask_sampling.py,
test_targets.py, test_instance_masks.py, test_batch_pad.py): numpy only, no fastq.

``nearest_centre`` transcribes the arithmetic of TensorFlow's resize_nearest_neighbor with
half_pixel_centers=True, which ``tf.image.resize(method="nearest")`` runs: in float32,
scale = in / out and source index = min(floor((x + 0.5) * scale), in - 1).
tests/targets/test_mask_sampling.py checks it against TensorFlow itself, bit for bit.
"""
import numpy as np


def centre_index(n_in, n_out):
    """The source index under each of n_out output pixels' centres."""
    scale = np.float32(n_in) / np.float32(n_out)
    x = np.arange(n_out, dtype=np.float32) + np.float32(0.5)
    return np.minimum(np.floor(x * scale).astype(np.int64), n_in - 1)


def nearest_centre(m, out_h, out_w):
    """m (H x W [x C]) resized to out_h x out_w, nearest at pixel centres."""
    return m[centre_index(m.shape[0], out_h)][:, centre_index(m.shape[1], out_w)]
