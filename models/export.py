"""Export the example model with the running TensorFlow (run inside a version's venv).

    python -m models.export --out models/build/tf2.9/my_model --model-version 1

The model is the seeds' Dense 784 -> 128 -> relu -> 10 -> softmax, input `x`
float32 [-1, 784]. Weights come from numpy with a fixed seed, not from TF's
initialisers, so every TF version exports numerically the same model and the
versions are compared on identical work. A plain tf.Module is used instead of
Keras because Keras 3 (TF >= 2.16) no longer writes SavedModels with model.save.

It also writes assets.extra/tf_serving_warmup_requests: a TFRecord file of
PredictionLog protos, the format TF Serving replays at load time.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

INPUT_DIM, HIDDEN, CLASSES = 784, 128, 10
SIGNATURE = "serving_default"


def seeded_weights(seed: int, scale: float = 1.0):
    """Glorot-uniform weights and zero biases, the same for every TF version."""
    rng = np.random.RandomState(seed)

    def glorot(fan_in, fan_out):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, size=(fan_in, fan_out)).astype(np.float32)

    w1, w2 = glorot(INPUT_DIM, HIDDEN), glorot(HIDDEN, CLASSES)
    return w1 * scale, np.zeros(HIDDEN, np.float32), w2, np.zeros(CLASSES, np.float32)


SLOW_WIDTH = 2048
SLOW_REPEAT = 8


def build_module(seed: int, extra_layers: int = 0):
    """The tf.Module; extra_layers > 0 adds a 128 -> 2048 -> ... -> 2048 -> 128 stack of relu
    layers, its 2048x2048 middle run SLOW_REPEAT times over (the same weights: the work grows, the
    export does not): a deliberately much slower model for the regression gate."""
    import tensorflow as tf

    w1, b1, w2, b2 = seeded_weights(seed)
    rng = np.random.RandomState(seed + 1)
    dims = [HIDDEN] + [SLOW_WIDTH] * extra_layers + [HIDDEN] if extra_layers else []
    extra = [(rng.uniform(-1, 1, size=(a, b)) * np.sqrt(3.0 / a)).astype(np.float32) for a, b in zip(dims, dims[1:])]

    class DenseClassifier(tf.Module):
        def __init__(self):
            super().__init__(name="dense_classifier")
            self.w1, self.b1 = tf.Variable(w1, name="w1"), tf.Variable(b1, name="b1")
            self.w2, self.b2 = tf.Variable(w2, name="w2"), tf.Variable(b2, name="b2")
            self.extra = [tf.Variable(w, name="extra_%d" % i) for i, w in enumerate(extra)]

        @tf.function(input_signature=[tf.TensorSpec([None, INPUT_DIM], tf.float32, name="x")])
        def serve(self, x):
            h = tf.nn.relu(tf.matmul(x, self.w1) + self.b1)
            for i, w in enumerate(self.extra):
                square = 0 < i < len(self.extra) - 1
                for _ in range(SLOW_REPEAT - 1 if square else 0):
                    h = tf.nn.relu(tf.matmul(h, w))
                h = tf.nn.relu(tf.matmul(h, w))
            return {"probabilities": tf.nn.softmax(tf.matmul(h, self.w2) + self.b2)}

    return DenseClassifier()


def warmup_records(model_name: str, seed: int, count: int = 4):
    """Serialized PredictionLog protos (batch sizes 1..count) for the warmup file."""
    import tensorflow as tf
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    rng = np.random.RandomState(seed)
    for n in range(1, count + 1):
        req = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(name=model_name, signature_name=SIGNATURE))
        req.inputs["x"].CopyFrom(tf.make_tensor_proto(rng.rand(n, INPUT_DIM).astype(np.float32)))
        log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=req))
        yield log.SerializeToString()


def export(out: str, model_version: int, seed: int, model_name: str, extra_layers: int = 0) -> str:
    """Write <out>/<model_version>/ atomically (temp dir + rename); return its path."""
    import tensorflow as tf

    final = os.path.join(out, str(model_version))
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".export-", dir=out)
    try:
        module = build_module(seed, extra_layers)
        tf.saved_model.save(module, tmp, signatures={SIGNATURE: module.serve})
        extra = os.path.join(tmp, "assets.extra")
        os.makedirs(extra, exist_ok=True)
        with tf.io.TFRecordWriter(os.path.join(extra, "tf_serving_warmup_requests")) as w:
            for record in warmup_records(model_name, seed):
                w.write(record)
        # mkdtemp makes it 0700: a model server in a container runs as another user and must read it.
        os.chmod(tmp, 0o755)
        if os.path.exists(final):
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.export", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="model base path (version dirs go below it)")
    p.add_argument("--model-version", type=int, default=1)
    p.add_argument("--model-name", default="my_model")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--extra-layers", type=int, default=0, help="add 2048-wide layers: a slower model")
    args = p.parse_args(argv)
    if args.model_version < 1:
        p.error("--model-version must be >= 1")
    path = export(args.out, args.model_version, args.seed, args.model_name, args.extra_layers)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
