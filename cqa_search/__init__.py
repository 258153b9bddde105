"""cqa_search: question retrieval for community question answering archives."""
from ._version import __version__
from .analysis import Analyzer
from .archive import Archive, Question
from .engine import SearchConfig, SearchEngine
from .index.build import build_index
from .results import Results

__all__ = ["Archive", "Question", "Analyzer", "build_index", "SearchEngine", "SearchConfig",
           "Results", "__version__"]
