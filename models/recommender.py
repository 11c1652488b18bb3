"""A TFX-style recommender, the commonest shape of a production TF Serving model, built offline with seeded random
weights inside a version's venv (TensorFlow's own TF1 API, as Estimator and TFX exports are):

    python -m models.recommender --out models/build/zoo/recommender-tf2.9/recommender/1

Every signature takes serialized tf.Example (`examples` / `inputs`: a string vector) and parses it in the graph
(ParseExampleV2): user (string, looked up in the vocabulary asset user_vocab.txt, unknown users to an OOV row),
item (int64 id, hashed into 2,000 embedding rows), tags (a variable-length string list, hashed, averaged),
price (float), hour (int64, one-hot of 24). Embeddings, two dense layers, a sigmoid.
Signatures: serving_default (predict: probabilities, score), classify (classes, scores), regress (outputs).
"""
from __future__ import annotations

import os
import sys
import tempfile

from models import zoo_cli

USERS, ITEMS, TAG_BUCKETS, DIM = 500, 2000, 100, 16


def build(path: str, seed: int = 7) -> str:
    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    rng = np.random.RandomState(seed)
    graph = tf.Graph()
    with graph.as_default():
        serialized = v1.placeholder(tf.string, [None], name="examples")
        spec = {"user": tf.io.FixedLenFeature([], tf.string, default_value=""),
                "item": tf.io.FixedLenFeature([], tf.int64, default_value=0),
                "price": tf.io.FixedLenFeature([], tf.float32, default_value=0.0),
                "hour": tf.io.FixedLenFeature([], tf.int64, default_value=0),
                "tags": tf.io.VarLenFeature(tf.string)}
        f = tf.io.parse_example(serialized, spec)
        vocab = os.path.join(tempfile.mkdtemp(), "user_vocab.txt")
        with open(vocab, "w") as fh:
            fh.write("".join(f"user{i}\n" for i in range(USERS)))
        asset = tf.constant(vocab, name="user_vocab_path")
        v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, asset)
        table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(asset, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
                                          tf.lookup.TextFileIndex.LINE_NUMBER), default_value=USERS)  # OOV row

        def weights(name, shape, scale):
            return v1.Variable(rng.normal(0, scale, shape).astype(np.float32), name=name)

        user = tf.nn.embedding_lookup(weights("user_embedding", [USERS + 1, DIM], 0.1), table.lookup(f["user"]))
        item = tf.nn.embedding_lookup(weights("item_embedding", [ITEMS, DIM], 0.1), tf.math.floormod(f["item"], ITEMS))
        tags = f["tags"]
        tag_ids = tf.SparseTensor(tags.indices, tf.strings.to_hash_bucket_fast(tags.values, TAG_BUCKETS),
                                  tags.dense_shape)
        tag = tf.nn.safe_embedding_lookup_sparse(weights("tag_embedding", [TAG_BUCKETS, DIM], 0.1), tag_ids,
                                                 combiner="mean")
        hour = tf.one_hot(tf.math.floormod(f["hour"], 24), 24)
        x = tf.concat([user, item, tag, tf.expand_dims(f["price"], 1), hour], axis=1)
        h = tf.nn.relu(tf.matmul(x, weights("dense1", [3 * DIM + 25, 64], 0.2)) + weights("bias1", [64], 0.01))
        logit = tf.matmul(h, weights("dense2", [64, 1], 0.2))
        score = tf.reshape(tf.sigmoid(logit), [-1], name="score")
        probabilities = tf.stack([1.0 - score, score], axis=1, name="probabilities")
        classes = tf.tile(tf.constant([["skip", "click"]]), [tf.shape(score)[0], 1], name="classes")
        info = v1.saved_model.utils.build_tensor_info
        sig = v1.saved_model.signature_def_utils.build_signature_def
        ex = info(serialized)
        signatures = {
            "serving_default": sig({"examples": ex}, {"probabilities": info(probabilities), "score": info(score)},
                                   "tensorflow/serving/predict"),
            "classify": sig({"inputs": ex}, {"classes": info(classes), "scores": info(probabilities)},
                            "tensorflow/serving/classify"),
            "regress": sig({"inputs": ex}, {"outputs": info(score)}, "tensorflow/serving/regress"),
        }
        init = v1.tables_initializer(name="legacy_init_op")
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(init)
            builder = v1.saved_model.Builder(path)
            builder.add_meta_graph_and_variables(sess, [v1.saved_model.tag_constants.SERVING],
                                                 signature_def_map=signatures, main_op=init,
                                                 assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS))
            builder.save()
    return path


def main(argv=None) -> int:
    return zoo_cli.run(build, "models.recommender", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
