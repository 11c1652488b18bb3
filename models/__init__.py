"""The example model: export per TensorFlow version, warmup records, user models."""
