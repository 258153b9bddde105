"""Word vectors learned from the archive, question vectors, the dense first stage and the
soft-cosine features (``cqa-search fit INDEX embeddings``).

:class:`EmbeddingModel` is what an index stores; :mod:`.embeddings` learns word vectors
(PPMI-SVD, word2vec), :mod:`.sif` makes sentence vectors, :mod:`.dense` finds the nearest
question vectors, :mod:`.softcos` compares bags of words through similar words,
:mod:`.parts` gives the titles and bodies, :mod:`.scoring` the features.
"""
from .model import EmbeddingModel
from .scoring import FEATURE_NAMES, EmbeddingScorer

__all__ = ["EmbeddingModel", "EmbeddingScorer", "FEATURE_NAMES"]
