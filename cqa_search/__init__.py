"""cqa_search: question retrieval for community question answering archives."""
from ._version import __version__

__all__ = ["Archive", "Question", "Analyzer", "build_index", "add_questions",
           "delete_questions", "compact", "SearchEngine", "SearchConfig", "Results",
           "__version__"]

# Public name -> its module. The names are imported on first use, so that
# `cqa-search --help` and a plain BM25 query start without importing what they do not need.
_HOMES = {"Archive": "archive", "Question": "archive", "Analyzer": "analysis",
          "build_index": "index.build", "add_questions": "index.live",
          "delete_questions": "index.live", "compact": "index.live",
          "SearchEngine": "engine", "SearchConfig": "engine",
          "Results": "results"}


def __getattr__(name):
    if name in _HOMES:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
