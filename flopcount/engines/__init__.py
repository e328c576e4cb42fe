"""Who runs the model when its latency is measured: ``flopcount`` (its own runtime: the graph
executor or the eager view, the default), ``torch`` (the user's PyTorch model, timed by
PyTorch module by module: ``torch_engine.py``) or ``onnxruntime`` (an ONNX file timed by
onnxruntime node by node: ``onnxruntime_engine.py``) or ``jax`` (a JAX model's jitted call
timed by JAX: ``jax_engine.py``). Counts always come from flopcount's rules."""

ENGINES = ("flopcount", "torch", "onnxruntime", "jax")

__all__ = ["ENGINES"]
