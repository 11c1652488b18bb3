"""TF Serving's kind of test models, built here with TensorFlow's own TF1 API (never downloaded), run
inside a version's venv:

    python -m models.testdata --out models/build/tf2.9/testdata

half_plus_two/00000123/   the shape of TF Serving's own half_plus_two: a TF1 graph whose `x` is not a
                          placeholder but the parsed `x` feature of serialized tf.Examples (static shape
                          [?, 1]); y = 0.5 x + 2. Signatures: serving_default and predict_x (x -> y),
                          regress_x_to_y and tensorflow/serving/regress (examples -> outputs),
                          classify_x_to_y (examples -> scores), classify_x_to_label (examples -> classes
                          looked up in an asset file, labels.txt, through a table the legacy init op fills).
                          The version directory is zero-padded, as TF Serving's is.
half_plus_n/1, /2         y = 0.5 x + 2, then + 3: two versions, for the version policy and labels.
half_plus_two_tf2/00000123/  the same function saved by TF2's tf.saved_model.save, as TF Serving's
                          saved_model_half_plus_two_tf2: every signature's method_name is
                          tensorflow/serving/predict, including regress_x_to_y and classify_x_to_y
                          (examples "inputs" -> "outputs" / "scores"), which TF Serving runs with
                          its default --enable_signature_method_name_check=false; predict_many
                          (x -> y0 ... y7) for output filters.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile


def build_half_plus(path: str, offset: float, with_labels: bool = True) -> None:
    import tensorflow as tf

    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        serialized = v1.placeholder(tf.string, name="tf_example")
        features = v1.parse_example(serialized, {"x": v1.FixedLenFeature([1], tf.float32)})
        x = tf.identity(features["x"], name="x")  # not a placeholder: a fed intermediate tensor
        a = v1.Variable(0.5, name="a")
        b = v1.Variable(offset, name="b")
        y = tf.add(tf.multiply(a, x), b, name="y")
        info = v1.saved_model.utils.build_tensor_info
        ex, xi, yi = info(serialized), info(x), info(y)
        sig = v1.saved_model.signature_def_utils.build_signature_def
        predict = sig({"x": xi}, {"y": yi}, "tensorflow/serving/predict")
        regress = sig({"inputs": ex}, {"outputs": yi}, "tensorflow/serving/regress")
        signatures = {"serving_default": predict, "predict_x": predict, "regress_x_to_y": regress,
                      "tensorflow/serving/regress": regress,
                      "classify_x_to_y": sig({"inputs": ex}, {"scores": yi}, "tensorflow/serving/classify")}
        init = None
        if with_labels:
            tmp = tempfile.mkdtemp()
            labels = os.path.join(tmp, "labels.txt")
            with open(labels, "w") as f:
                f.write("small\nlarge\n")
            asset = tf.constant(labels, name="labels_path")
            v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, asset)
            table = tf.lookup.StaticHashTable(
                tf.lookup.TextFileInitializer(asset, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER, tf.string,
                                              tf.lookup.TextFileIndex.WHOLE_LINE), default_value="?")
            classes = table.lookup(tf.cast(tf.greater(y, 3.0), tf.int64), name="classes")
            signatures["classify_x_to_label"] = sig({"inputs": ex}, {"classes": info(classes), "scores": yi},
                                                    "tensorflow/serving/classify")
            init = v1.tables_initializer(name="legacy_init_op")
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            if init is not None:
                sess.run(init)
            builder = v1.saved_model.Builder(path)
            builder.add_meta_graph_and_variables(sess, [v1.saved_model.tag_constants.SERVING],
                                                 signature_def_map=signatures, main_op=init,
                                                 assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS))
            builder.save()


def build_half_plus_tf2(path: str) -> None:
    import tensorflow as tf

    class HalfPlusTwo(tf.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = tf.Variable(0.5), tf.Variable(2.0)

        def y(self, x):
            return self.a * x + self.b

        @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32, name="x")])
        def predict(self, x):
            return {"y": self.y(x)}

        def _examples(self, serialized):
            return tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32)})["x"]

        @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32, name="x")])
        def many(self, x):  # eight outputs, y + 0 ... y + 7: 255 output filters, for the callable cache's bound
            return {f"y{i}": self.y(x) + float(i) for i in range(8)}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def regress(self, inputs):
            return {"outputs": self.y(self._examples(inputs))}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def classify(self, inputs):
            return {"scores": self.y(self._examples(inputs))}

    m = HalfPlusTwo()
    tf.saved_model.save(m, path, signatures={"serving_default": m.predict, "regress_x_to_y": m.regress,
                                             "classify_x_to_y": m.classify, "predict_many": m.many})


MODELS = ("half_plus_two", "half_plus_n", "half_plus_two_tf2")
REVISION = "r2"  # with MODELS, what .complete holds: a build of other models or an older revision is redone


def export(out: str) -> str:
    """Write every test model under out/, atomically (a temp dir renamed into place)."""
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".testdata-", dir=out)
    try:
        build_half_plus(os.path.join(tmp, "half_plus_two", "00000123"), 2.0)
        build_half_plus(os.path.join(tmp, "half_plus_n", "1"), 2.0, with_labels=False)
        build_half_plus(os.path.join(tmp, "half_plus_n", "2"), 3.0, with_labels=False)
        build_half_plus_tf2(os.path.join(tmp, "half_plus_two_tf2", "00000123"))
        for root, dirs, _ in os.walk(tmp):  # readable by a server running as another user
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        os.chmod(tmp, 0o755)
        for name in MODELS:
            final = os.path.join(out, name)
            if os.path.exists(final):
                shutil.rmtree(final)
            os.rename(os.path.join(tmp, name), final)
        with open(os.path.join(out, ".complete"), "w") as f:
            f.write(" ".join((*MODELS, REVISION)) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.testdata", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    print(export(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
