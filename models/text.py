"""A text encoder for the zoo: a small BERT-style transformer on int32 token ids (two blocks of multi-head
self-attention and a feed-forward layer, layer norms, learned positions), seeded random weights:

    python -m models.text --out models/build/zoo/text-tf2.9.3/text/1

serving_default  input_ids: int32 [batch, 32] (ids < 1000) -> pooled [batch, 64], logits [batch, 2]
"""
from __future__ import annotations

import sys

from models import zoo_cli

VOCAB, LENGTH, DIM, HEADS, BLOCKS = 1000, 32, 64, 4, 2


def build(path: str, seed: int = 7) -> str:
    import tensorflow as tf

    tf.random.set_seed(seed)
    ids = tf.keras.Input([LENGTH], dtype=tf.int32, name="input_ids")
    x = tf.keras.layers.Embedding(VOCAB, DIM)(ids)
    x = x + tf.keras.layers.Embedding(LENGTH, DIM)(tf.range(LENGTH))
    for _ in range(BLOCKS):
        att = tf.keras.layers.MultiHeadAttention(HEADS, DIM // HEADS)(x, x)
        x = tf.keras.layers.LayerNormalization()(x + att)
        ff = tf.keras.layers.Dense(DIM)(tf.keras.layers.Dense(2 * DIM, activation="gelu")(x))
        x = tf.keras.layers.LayerNormalization()(x + ff)
    pooled = tf.keras.layers.Dense(DIM, activation="tanh")(x[:, 0])
    logits = tf.keras.layers.Dense(2)(pooled)
    model = tf.keras.Model(ids, [pooled, logits])

    class Text(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        @tf.function(input_signature=[tf.TensorSpec([None, LENGTH], tf.int32, name="input_ids")])
        def encode(self, input_ids):
            pooled, logits = self.model(input_ids, training=False)
            return {"pooled": pooled, "logits": logits}

    m = Text()
    tf.saved_model.save(m, path, signatures={"serving_default": m.encode})
    return path


def main(argv=None) -> int:
    return zoo_cli.run(build, "models.text", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
