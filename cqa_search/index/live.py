"""A live archive: questions added and deleted without a rebuild, and compaction.

Each change is one new generation (:class:`~cqa_search.index.store.IndexWriter`), written
under the writers' lock from the generation live at that moment, so that it is atomic,
survives a crash at any point (the previous generation stays live) and never races
another writer:

- :func:`add_questions` writes the new questions as one more *segment*: its postings use
  the index's vocabulary, extended with the new terms (term ids only grow);
- :func:`delete_questions` marks rows as deleted (*tombstones*, ``deleted.npy`` of their
  segment); a question replaced by ``add_questions(..., replace=True)`` is deleted and
  added again;
- :func:`compact` merges the segments into one without the deleted rows, renumbering the
  rows; stored models with a row per question follow (``select_rows``).

Collection statistics (document frequencies, lengths, term frequencies) are those of the
live rows, kept up to date by each change, so every score after a change equals that of a
fresh build of the same live archive. Stored models stay usable: new questions are folded
into the topic and multiview models when an engine opens the index, get translation
features from the existing tables, and the ranker is unchanged; ``cqa-search info``
says how many questions each model has not seen.

Each function checks its input and leaves the writing to the index's write back-end
(:mod:`cqa_search.index.writer`): a sharded index changes its shards with the same
functions, all in one new top-level generation.
"""
from __future__ import annotations

import time

from .._utils import progress_bar
from ..exceptions import ArchiveError, IndexFormatError
from .build import checked_questions, read_archive
from .changes import ChangeSummary
from .models import stale_inputs
from .store import open_index
from .writer import open_writer, writer_class

__all__ = ["add_questions", "delete_questions", "compact", "ChangeSummary", "index_info"]


def add_questions(path, archive, *, replace=False, format=None, skip_invalid=False,
                  progress=False, **reader_options) -> ChangeSummary:
    """Add questions to the index at ``path`` as a new segment (atomically).

    On a sharded index, the new questions go to the shards with the fewest live questions
    (:mod:`cqa_search.index.sharded_writer`), in one new top-level generation.

    Parameters
    ----------
    path : path
        An index (built by :func:`~cqa_search.build_index`).
    archive : path, list of paths, or iterable of Question
        The new questions (files are read as :func:`~cqa_search.build_index` reads them).
    replace : bool, default False
        A question whose id the index has replaces it (e.g. with new answers); without
        it such a question is refused, naming its id.
    format, skip_invalid, progress, **reader_options
        As :func:`~cqa_search.build_index`.

    Returns
    -------
    ChangeSummary

    Raises
    ------
    ArchiveError
        A question id the index already has (without ``replace``), twice in the new
        questions, an invalid record, no question at all.
    IndexFormatError
        No index at ``path``.
    """
    t0 = time.perf_counter()
    with open_writer(path) as writer:  # (a clear error for a missing index before reading)
        questions, report, _ = read_archive(archive, format=format,
                                            skip_invalid=skip_invalid,
                                            reader_options=reader_options)
        questions = checked_questions(
            questions, progress_bar(progress, "adding", "questions"),
            duplicate="question id {!r} is twice in the new questions")
        return writer.add(questions, report, replace=replace, t0=t0)


def delete_questions(path, doc_ids, *, missing_ok=False) -> ChangeSummary:
    """Delete questions from the index at ``path`` by id (atomically; tombstones).

    Raises
    ------
    ArchiveError
        An id the index does not have (unless ``missing_ok``), or no id.
    """
    t0 = time.perf_counter()
    if isinstance(doc_ids, str):  # its characters are not the ids meant
        raise ArchiveError(f"doc_ids must be a list of ids, not one string; got {doc_ids!r}")
    doc_ids = list(dict.fromkeys(str(d) for d in doc_ids))
    if not doc_ids:
        raise ArchiveError("no question id to delete")
    with open_writer(path) as writer:
        return writer.delete(doc_ids, missing_ok=missing_ok, t0=t0)


def compact(path, *, ray=None, progress=False) -> ChangeSummary:
    """Merge the segments of the index at ``path`` into one, without its deleted rows.

    Rows are renumbered: stored models with a row per question are carried over to the new
    rows (``select_rows``; questions added since their fit are folded in first); the
    others are kept as they are. Models fitted before the compaction and stored after it
    are refused (they would address the old rows). A sharded index compacts each shard
    that has deleted rows or more than one segment
    (:mod:`cqa_search.index.sharded_writer`): in this process, or by a Ray task per shard
    on the cluster's nodes, this process writing only the top-level generation (``ray``:
    True, a local Ray session or the current one, or a cluster's address; None, the
    default: on Ray when ``RAY_ADDRESS`` names a cluster; unused by an unsharded index).
    Ray's workers know the model kinds of the package (a kind registered by a program
    compacts in this process).
    """
    t0 = time.perf_counter()
    with open_writer(path) as writer:
        return writer.compact(t0=t0, ray=ray)


def _ranker_meta(stored, name):
    """The feature names a stored ranker reads, its hybrid weight and the name of its
    retrieval model (None: the index's default, for a ranker that records none; all None
    when its model file is damaged: opening the index says so)."""
    try:
        meta = stored.model(name).meta
    except IndexFormatError:
        return None, None, None
    names, a, spec = meta.get("feature_names"), meta.get("hybrid_weight"), meta.get("retrieval")
    return (names if isinstance(names, list) else None,
            a if isinstance(a, (int, float)) and not isinstance(a, bool) else None,
            spec.get("name") if isinstance(spec, dict) else None)


def index_info(path) -> dict:
    """What ``cqa-search info`` shows: generation, segments, questions, and for every stored
    model how many questions were added and deleted since its fit, the stored models it
    was fitted from that were fitted again since (``refitted_since``:
    :func:`~cqa_search.index.models.stale_inputs`; for a ranker, the models of its
    features), and for a ranker the ``features`` it reads, its ``hybrid_weight`` and its
    ``retrieval`` model's name."""
    stored = open_index(path)
    parts = writer_class(stored).info(stored)
    m = stored.manifest
    counters = m.get("counters", {})
    stats = m.get("stats", {})
    models = {}
    for name, entry in stored.models.items():
        fitted = entry.get("counters", {})
        models[name] = {"kind": entry["kind"], "created": entry.get("created"),
                        "added_since": int(counters.get("added", 0))
                        - int(fitted.get("added", 0)),
                        "deleted_since": int(counters.get("deleted", 0))
                        - int(fitted.get("deleted", 0)),
                        "refitted_since": stale_inputs(stored.models, name)}
        if entry["kind"] == "ranker":
            models[name]["features"], models[name]["hybrid_weight"], \
                models[name]["retrieval"] = _ranker_meta(stored, name)
    return {"path": stored.path, "generation": stored.generation,
            "created": m.get("created"), "format_version": m.get("format_version"),
            "questions": int(stats.get("n_docs", 0)), "rows": int(stats.get("n_rows", 0)),
            "segments": [{"name": s["name"], "rows": int(s["n_docs"]),
                          "deleted": int(s["n_deleted"])} for s in m.get("segments", [])],
            "terms": int(stats.get("n_terms", 0)),
            "categories": parts["categories"],  # (those with live questions)
            "fields": list(stats.get("fields", {})), "models": models,
            "shards": parts["shards"],
            "analyzer": m.get("analyzer"), "sources": m.get("sources", [])}
