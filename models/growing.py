"""A model whose memory really grows with use, the positive control of the memory verdicts: every call inserts
KEYS new int64 keys into a MutableHashTable (as a model that learns its vocabulary online, or a cache nobody
evicts, does), so its server's RSS climbs by about KEYS table entries per call:

    python -m models.growing --out models/build/zoo/growing-tf2.9.3/growing/1
    make calibrate VERSION=2.21 MODEL_B=growing        # the growth verdict must call 2.21-b growing

serving_default  x: float32 [batch, 784] (the example model's input) -> y: float32 [batch, 1], the row sums
"""
from __future__ import annotations

import sys

from models import zoo_cli

INPUT_DIM = 784
KEYS = 64  # new entries per call: about 25 MiB per 10k requests, far above an allocator's noise (< 1)


def build(path: str) -> str:
    import tensorflow as tf

    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, INPUT_DIM], name="x")
        calls = v1.Variable(0, dtype=tf.int64, name="calls", use_resource=True)
        table = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, default_value=0.0, name="seen")
        n = calls.assign_add(1)
        keys = n * KEYS + tf.range(KEYS, dtype=tf.int64)  # never seen before: the table only grows
        insert = table.insert(keys, tf.fill([KEYS], 1.0))
        with tf.control_dependencies([insert]):
            y = tf.reduce_sum(x, axis=1, keepdims=True, name="y")
        info = v1.saved_model.utils.build_tensor_info
        sig = v1.saved_model.signature_def_utils.build_signature_def(
            {"x": info(x)}, {"y": info(y)}, "tensorflow/serving/predict")
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.Builder(path)
            builder.add_meta_graph_and_variables(sess, [v1.saved_model.tag_constants.SERVING],
                                                 signature_def_map={"serving_default": sig})
            builder.save()
    return path


def main(argv=None) -> int:
    return zoo_cli.run(build, "models.growing", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
