"""A drop-in for `tensorflow_model_server` on the real TensorFlow runtime of a venv.

Same flags, same REST and gRPC API, same Prometheus metric names as TF Serving, so
the rest of the stack cannot tell the two apart. It runs inside a per-version venv
(Python 3.9 for TF 2.6-2.11), so it sticks to Python 3.9 syntax.
"""
