"""A tf.data service trainer for tests/tf/test_tf_service.py, run as its own process (so a
hang is bounded by the test's subprocess timeout and a crash cannot take pytest down).

    python tests/helpers/tf_service_scenario.py MODE DISPATCHER FILES_JSON [--kill-pid PID --kill-after K]

MODE: off (processing_mode "off": every worker produces the whole dataset) or dynamic
("distributed_epoch": the files are handed out to workers one split at a time).
The dataset: file paths + their indices -> read_file -> batch(4) -> fastq's op.
Every element received is compared with a fastq Pipeline over the same files
(Bytes source, epoch 0, same seed and ops).  Prints one JSON line:
{"elements", "counts": {index: times seen}, "mismatch": [indices], "error", "killed"}.
"""
import json
import os
import signal
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the checkout

SEED = 11
BATCH = 4


def chain():
    import fastq.ops as ops
    return [ops.RandomResizedCrop(48), ops.HorizontalFlip(), ops.ColorJitter(0.3, 0.3, 0.3, 0.05)]


def make_dataset(tf, paths):
    from fastq.tf import ops as tf_ops
    n = len(paths)
    ds = tf.data.Dataset.from_tensor_slices((tf.constant(paths), tf.range(n, dtype=tf.int64)))
    ds = ds.map(lambda p, i: (tf.io.read_file(p), i))
    ds = ds.batch(BATCH)
    return ds.map(lambda enc, i: (tf_ops.decode_augment(enc, i, ops=chain(), seed=SEED, epoch=0), i))


def reference(paths):
    import fastq
    bufs = [open(p, "rb").read() for p in paths]
    pipe = fastq.Pipeline(fastq.sources.Bytes(bufs), batch_size=len(bufs), ops=chain(), seed=SEED, dtype="uint8",
                          drop_remainder=False, workers=1)
    (x,) = [b[0].copy() for b in pipe]
    pipe.close()
    return x


def main():
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["off", "dynamic"])
    p.add_argument("dispatcher")
    p.add_argument("files")
    p.add_argument("--kill-pid", type=int)
    p.add_argument("--kill-after", type=int, default=2)
    p.add_argument("--compression", default="AUTO")
    p.add_argument("--stall-timeout", type=float, default=60.0)
    a = p.parse_args()
    import tensorflow as tf
    paths = json.load(open(a.files))
    ref = reference(paths)
    ds = make_dataset(tf, paths)
    policy = tf.data.experimental.service.ShardingPolicy
    mode = policy.OFF if a.mode == "off" else policy.DYNAMIC
    ds = ds.apply(tf.data.experimental.service.distribute(
        processing_mode=mode, service=a.dispatcher, job_name=f"fastq-test-{a.mode}-{os.getpid()}",
        compression=None if a.compression == "NONE" else a.compression))
    from fastq.tf.serve import ServiceStalledError, iterate
    counts, mismatch, elements, error, killed = {}, [], 0, None, False
    try:
        for images, index in iterate(ds, stall_timeout=a.stall_timeout):
            elements += 1
            images, index = images.numpy(), index.numpy()
            for row, i in enumerate(index):
                counts[int(i)] = counts.get(int(i), 0) + 1
                if not np.array_equal(images[row], ref[i]):
                    mismatch.append(int(i))
            if a.kill_pid and not killed and elements >= a.kill_after:
                os.kill(a.kill_pid, signal.SIGKILL)
                killed = True
    except tf.errors.OpError as e:
        error = f"{type(e).__name__}: {e.message}"
    except ServiceStalledError as e:
        error = f"ServiceStalledError: {e}"
    print(json.dumps({"elements": elements, "counts": counts, "mismatch": mismatch, "error": error,
                      "killed": killed}), flush=True)


if __name__ == "__main__":
    main()
