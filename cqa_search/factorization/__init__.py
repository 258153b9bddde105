"""Matrix factorization models: topics (Zhou et al., 2014) and SMT + MF (Zhou et al., 2013).

NMF, CNMF, GNMF and GNMFNC of the tf-idf term–question matrix, batched folding in by
non-negative least squares, and :class:`TopicModel`, the stored model whose feature is the
topic-space cosine (eq. 13); :func:`interpolate` is eq. 14. :class:`MultiViewNMF` factorizes
the original text jointly with its translations (views, see views.py); the stored
:class:`MultiViewModel` gives one cosine feature per view.
"""
from .gnmf import CNMF, GNMF, GNMFNC
from .multiview import MultiViewModel, MultiViewNMF
from .nmf import NMF
from .nnls import nnls_gram
from .topics import (VARIANTS, TopicInterpolation, TopicModel, TopicScorer, interpolate,
                     term_question_matrix)

__all__ = ["NMF", "CNMF", "GNMF", "GNMFNC", "nnls_gram", "TopicModel", "TopicScorer",
           "TopicInterpolation", "interpolate", "term_question_matrix", "VARIANTS",
           "MultiViewNMF", "MultiViewModel"]
