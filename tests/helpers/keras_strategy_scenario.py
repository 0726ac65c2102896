"""Keras fit under MirroredStrategy (two logical CPU devices) over a fastq dataset,
with and without fastq.tf.EpochSync (run in a subprocess by test_keras.py: the
logical devices must be set before TensorFlow initializes).  Prints one JSON
line per scenario."""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

import fastq  # noqa: E402
import fastq.tf as fqtf  # noqa: E402

RNG = np.random.RandomState(0)
IMGS = RNG.randint(0, 256, (48, 16, 16, 3), np.uint8)
LABELS = RNG.randint(0, 3, 48)
STRATEGY = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


class Record(keras.callbacks.Callback):
    """Which pipeline epoch each Keras epoch read, and how many steps it ran."""

    def __init__(self, p):
        super().__init__()
        self.p, self.seen, self.steps, self.after = p, {}, {}, {}

    def on_epoch_begin(self, epoch, logs=None):
        self.cur = epoch
        self.seen[epoch], self.steps[epoch] = set(), 0

    def on_train_batch_end(self, batch, logs=None):
        it = self.p._active
        if it is not None:
            self.seen[self.cur].add(it.epoch)
        self.steps[self.cur] += 1

    def on_epoch_end(self, epoch, logs=None):
        sd = self.p.state_dict()
        self.after[epoch] = [sd["epoch"], sd["position"]]


def run(name, sync, resume=None, epochs=3, initial_epoch=0):
    p = fastq.Pipeline(fastq.sources.Arrays(IMGS, LABELS), batch_size=8, workers=1, shuffle=True, seed=3)
    if resume is not None:
        p.load_state_dict({"epoch": resume[0], "position": resume[1]})
    with STRATEGY.scope():
        m = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Conv2D(4, 3),
                              keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(3)])
        m.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rec = Record(p)
    cbs = [fqtf.EpochSync(p), rec] if sync else [rec]
    m.fit(fqtf.dataset(p), epochs=epochs, initial_epoch=initial_epoch, verbose=0, callbacks=cbs, shuffle=False)
    print("RESULT " + json.dumps({
        "name": name, "seen": {str(k): sorted(v) for k, v in rec.seen.items()},
        "steps": {str(k): v for k, v in rec.steps.items()}, "after": {str(k): v for k, v in rec.after.items()},
        "epoch": p.epoch, "delivered": p.stats()["batches_delivered"]}), flush=True)
    p.close()


if __name__ == "__main__":
    run("plain", sync=False)
    run("sync", sync=True)
    run("resume", sync=True, resume=(1, 0), epochs=3, initial_epoch=1)
    sys.exit(0)
