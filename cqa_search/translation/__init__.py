"""Translation models for the lexical gap (zhou2011): IBM Model 1, word translation
(Jeon et al.), TransLM (Xue et al.) and the phrase-based P-Trans with its features.

Train with ``TranslationModel().fit(engine.view)`` (or ``cqa-search fit INDEX
translation``); the stored :class:`TranslationModel` gives the features ``wt``,
``translm``, ``ptrans_pt``, ``ptrans_ipt``, ``ptrans_lw``, ``ptrans_ilw``, ``ptrans_pa`` and
``ptrans_uwp``.
"""
from .corpus import ParallelCorpus, build_parallel_corpus
from .ibm1 import IBMModel1
from .model import TrainingSummary, TranslationModel
from .phrases import PhraseTable, PhraseVocabulary, extract_phrases
from .scoring import FEATURE_NAMES, TranslationScorer, segment_dp
from .textrank import textrank_filter, textrank_scores

__all__ = ["ParallelCorpus", "build_parallel_corpus", "IBMModel1", "PhraseTable",
           "PhraseVocabulary", "extract_phrases", "TranslationModel", "TrainingSummary",
           "TranslationScorer", "FEATURE_NAMES", "segment_dp",
           "textrank_filter", "textrank_scores"]

