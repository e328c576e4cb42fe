"""Model files: the native format (one safetensors file, the graph as JSON in its metadata)."""

from .native import load, load_state_dict, save

__all__ = ["save", "load", "load_state_dict"]
