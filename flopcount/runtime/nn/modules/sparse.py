"""Embedding: a lookup table of ``num_embeddings`` rows of size ``embedding_dim``."""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import ShapeError
from ...factories import empty
from ...ops.embedding import embedding
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Embedding"]


class Embedding(Module):
    """Rows of ``weight`` (num_embeddings, embedding_dim), initialized N(0, 1), picked by ids.

    The ``padding_idx`` row starts at zero and gets no gradient. ``max_norm`` is not supported;
    ``sparse=True`` gives a dense gradient.

    >>> emb = Embedding(10, 3, padding_idx=0)
    >>> emb(rt.tensor([[0, 4]])).shape
    (1, 2, 3)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight=None, _freeze: bool = False, device=None, dtype=None):
        super().__init__()
        if max_norm is not None:
            raise NotImplementedError("Embedding: max_norm (renormalizing rows in place) is not supported")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ShapeError(f"Embedding: padding_idx {padding_idx} must be within num_embeddings "
                                 f"{num_embeddings}")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim, dtype=dtype or _dt.default_float,
                                          device=device), requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ShapeError(f"Embedding: _weight {tuple(_weight.shape)} does not match "
                                 f"({num_embeddings}, {embedding_dim})")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None and self.weight.data is not None:
            self.weight.data[self.padding_idx] = 0

    def forward(self, input):
        return embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                         self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx: int | None = None,
                        max_norm: float | None = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, sparse: bool = False) -> "Embedding":
        """An Embedding holding ``embeddings`` (2-d); ``freeze`` keeps it out of training."""
        if embeddings.ndim != 2:
            raise ShapeError(f"Embedding.from_pretrained: embeddings must be 2-d, got {tuple(embeddings.shape)}")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
