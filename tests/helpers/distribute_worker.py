"""One worker of the MultiWorkerMirroredStrategy test (test_distribute.py starts
two, with TF_CONFIG).  Trains a tiny model for one epoch of its shard and
writes the sample indices it saw to argv[1]."""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import fastq  # noqa: E402
import fastq.ops  # noqa: E402
import fastq.tf as fqtf  # noqa: E402

N, GLOBAL_BATCH, SIDE = 48, 8, 8


def main(out_path):
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    rng = np.random.default_rng(0)  # the same data on every worker
    images = rng.integers(0, 256, (N, SIDE, SIDE, 3), dtype=np.uint8)
    labels = np.arange(N) % 3
    source = fastq.sources.Arrays(images, labels)
    contexts = []

    def make_pipeline(input_context, per_replica_batch_size):
        contexts.append((input_context.num_input_pipelines, input_context.input_pipeline_id,
                         per_replica_batch_size))
        return fastq.Pipeline(fqtf.shard_source(source, input_context), batch_size=per_replica_batch_size,
                              queue_size=3, workers=1, return_index=True,
                              ops=[fastq.ops.Resize((SIDE, SIDE))], dtype="uint8")

    dist = fqtf.distribute_dataset(strategy, make_pipeline, GLOBAL_BATCH)
    with strategy.scope():
        w = tf.Variable(tf.zeros((SIDE * SIDE * 3, 3)))
        opt = tf.keras.optimizers.SGD(0.01)

    @tf.function
    def train_step(x, y):
        def step(x, y):
            with tf.GradientTape() as tape:
                feats = tf.reshape(tf.cast(x, tf.float32), (tf.shape(x)[0], -1)) / 255.0
                per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(y, feats @ w)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
            opt.apply_gradients([(tape.gradient(loss, w), w)])
            return loss
        losses = strategy.run(step, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    seen, losses = [], []
    for x, y, idx in dist:
        losses.append(float(train_step(x, y)))
        for t in strategy.experimental_local_results(idx):
            seen += t.numpy().tolist()
    task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    with open(out_path, "w") as f:
        json.dump({"task": task, "seen": seen, "losses": losses, "contexts": contexts,
                   "weights_sum": float(tf.reduce_sum(w))}, f)


if __name__ == "__main__":
    main(sys.argv[1])
