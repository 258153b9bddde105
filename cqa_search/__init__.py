"""cqa_search: question retrieval for community question answering archives."""
from ._version import __version__
from .analysis import Analyzer
from .archive import Archive, Question
from .engine import Results, SearchConfig, SearchEngine, build_index

__all__ = ["Archive", "Question", "Analyzer", "build_index", "SearchEngine", "SearchConfig",
           "Results", "__version__"]
