"""Encoded images for signatures that decode image bytes in the graph (the image deployments' usual signature):
seeded noise, JPEG-encoded by Pillow, sent over REST as {"b64": ...} and over gRPC as a string tensor."""
from __future__ import annotations

import io

import numpy as np

SIZE = 64  # the graph resizes whatever it decodes; a small image keeps the request set small


def jpegs(n: int, seed: int, size: int = SIZE) -> np.ndarray:
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return np.array(out, dtype=object)
