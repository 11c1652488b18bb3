"""An image classifier for the zoo: a keras.applications ResNet-50 (weights=None: seeded random weights, nothing
downloaded) on 64x64 RGB, with the two signatures image deployments have:

    python -m models.image --out models/build/zoo/image-tf2.9.3/image/1

serving_default  images: float32 [batch, 64, 64, 3] -> probabilities [batch, 10]
serving_bytes    image_bytes: string [batch] (JPEG or PNG, decoded and resized in the graph) -> probabilities
"""
from __future__ import annotations

import sys

from models import zoo_cli

SIZE, CLASSES = 64, 10


def build(path: str, seed: int = 7) -> str:
    import tensorflow as tf

    tf.random.set_seed(seed)
    net = tf.keras.applications.ResNet50(weights=None, input_shape=(SIZE, SIZE, 3), classes=CLASSES)

    class Image(tf.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        @tf.function(input_signature=[tf.TensorSpec([None, SIZE, SIZE, 3], tf.float32, name="images")])
        def floats(self, images):
            return {"probabilities": self.net(images, training=False)}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="image_bytes")])
        def jpeg(self, image_bytes):
            def decode(b):
                img = tf.io.decode_image(b, channels=3, expand_animations=False)
                return tf.image.resize(tf.cast(img, tf.float32) / 255.0, [SIZE, SIZE])
            images = tf.map_fn(decode, image_bytes, fn_output_signature=tf.TensorSpec([SIZE, SIZE, 3], tf.float32))
            return {"probabilities": self.net(images, training=False)}

    m = Image()
    tf.saved_model.save(m, path, signatures={"serving_default": m.floats, "serving_bytes": m.jpeg})
    return path


def main(argv=None) -> int:
    return zoo_cli.run(build, "models.image", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
