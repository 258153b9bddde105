"""Runs of a search engine on judged queries: what evaluation and ranker training read.

A query of a judged collection is natural text taken as it is (never parsed as query
syntax); its category, when known, is a feature of its candidates, not a filter.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..index.build import progress_bar

__all__ = ["run_queries", "feature_table"]


def _results(engine, query, candidates, k):
    """The engine's results of one query: a rerank of its candidates, or full retrieval
    (without the query itself when it is an archived question)."""
    qid, text, category = query["id"], query["text"], query.get("category")
    if candidates is not None:
        given = candidates.get(qid, {})
        if not given:
            return []
        res = engine.rerank(text, list(given), scores=list(given.values()), category=category)
        return list(zip(res.doc_ids, res.scores.tolist()))
    res = engine.retrieve(text, None if k is None else k + 1, category=category)
    ranked = [(d, s) for d, s in zip(res.doc_ids, res.scores.tolist()) if d != qid]
    return ranked[:k]


def run_queries(engine, queries, *, candidates=None, k=100, progress=False) -> dict:
    """A run ``{qid: {doc_id: score}}`` of ``engine`` for evaluation.

    Parameters
    ----------
    engine : SearchEngine
    queries : list of dict
        ``{"id", "text", "category"?}`` (see :func:`cqa_search.evaluation.read_queries`).
    candidates : dict, optional
        ``{qid: {doc_id: score}}`` (a run): rerank these candidates only (their scores
        are the ``given_*`` features); a query without candidates gets an empty
        ranking. Without candidates, the whole archive is searched (full retrieval,
        top ``k``); a query whose id is also an archived question's (e.g. a duplicate
        question used as a query) never retrieves itself.
    k : int or None, default 100
        Depth of full retrieval.
    progress : bool, default False
        Show a progress bar on stderr.

    Examples
    --------
    >>> import os, tempfile
    >>> from cqa_search import Question, SearchEngine, build_index
    >>> out = os.path.join(tempfile.mkdtemp(), "idx")
    >>> _ = build_index([Question("a", "renew visa"), Question("b", "visa fees")], out)
    >>> run = run_queries(SearchEngine.open(out), [{"id": "a", "text": "renew visa"}])
    >>> list(run["a"])
    ['b']
    """
    if candidates is None:
        engine._check_k(k)
    out = {}
    bar = progress_bar(progress, "evaluating", "queries")
    for query in queries:
        out[query["id"]] = dict(_results(engine, query, candidates, k))
        bar.update()
    bar.close()
    return out


def feature_table(engine, queries, *, candidates=None, k=100, progress=False):
    """Features of (query, candidate) pairs, for training and analysing rankers.

    Candidates are the given ones (``candidates``, a run) or the top ``k`` of the
    retrieval model (full retrieval; a query never gets itself). The engine's ranker is
    not applied: the candidates are those the ranker would reorder.

    Returns
    -------
    X : ndarray of shape (n_pairs, n_features)
    qid : ndarray of str, shape (n_pairs,)
    doc_ids : ndarray of str, shape (n_pairs,)
    feature_names : tuple of str
    """
    if engine.ranker is not None:
        engine = engine.with_config(replace(engine.config, ranker=None))
    run = run_queries(engine, queries, candidates=candidates, k=k, progress=progress)
    blocks, qids, docs = [], [], []
    for query in queries:
        ranked = list(run[query["id"]])
        if not ranked:
            continue
        given = candidates.get(query["id"], {}) if candidates is not None else None
        rows = engine.archive.rows(ranked).astype(np.int64)
        category = engine.categories[engine.categories.id(query.get("category"))] \
            if query.get("category") is not None else None
        q = engine.analyze(query["text"], category, None if given is None else {
            engine.archive.row(d): float(v) for d, v in given.items()})
        blocks.append(engine.feature_scores(q, rows))
        qids.extend([query["id"]] * len(ranked))
        docs.extend(ranked)
    X = np.vstack(blocks) if blocks else np.zeros((0, len(engine.feature_names)))
    return X, np.array(qids, dtype=str), np.array(docs, dtype=str), engine.feature_names
