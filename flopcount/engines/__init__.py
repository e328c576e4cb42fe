"""Who runs the model when its latency is measured: ``flopcount`` (its own runtime: the graph
executor or the eager view, the default) or ``torch`` (the user's PyTorch model, timed by
PyTorch module by module: ``torch_engine.py``). Counts always come from flopcount's rules."""

ENGINES = ("flopcount", "torch")

__all__ = ["ENGINES"]
