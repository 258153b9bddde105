"""Runs of a search engine on judged queries: what evaluation and ranker training read.

A query of a judged collection is natural text taken as it is (never parsed as query
syntax); its category, when known, is a feature of its candidates, not a filter.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .._utils import progress_bar
from ..features import GIVEN_FEATURES
from ..parallel import map_queries, n_workers
from .trec import as_queries, as_run

__all__ = ["run_queries", "feature_table", "run_of_scores"]


def _results(engine, query, candidates, k, features=True):
    """``(doc ids, scores, features)`` of one query: a rerank of its candidates, or full
    retrieval (without the query itself when it is an archived question); ``features``
    False: None in their place (hits' features are computed only when read)."""
    qid, text, category = query["id"], query["text"], query.get("category")
    parts = {"title": query.get("title"), "body": query.get("body")}  # per-field features
    if candidates is not None:
        given = candidates.get(qid, {})
        if not given:
            return [], np.zeros(0), np.zeros((0, len(engine.feature_names)))
        res = engine.rerank(text, list(given), scores=list(given.values()), category=category,
                            **parts)
        return list(res.doc_ids), res.scores, res.features if features else None
    res = engine.rerank(text, k=None if k is None else k + 1, category=category, **parts)
    keep = [i for i, d in enumerate(res.doc_ids) if d != qid][:k]
    return ([res.doc_ids[i] for i in keep], res.scores[keep],
            res.features[keep] if features else None)


def _inputs(queries, candidates):
    """Queries and candidates given as data or as paths of their files."""
    return as_queries(queries), None if candidates is None else as_run(candidates)


def _run_one(state, query):
    engine, candidates, k = state
    doc_ids, scores, _ = _results(engine, query, candidates, k, features=False)
    return dict(zip(doc_ids, scores.tolist()))


def _features_one(state, query):
    engine, candidates, k = state
    doc_ids, _, features = _results(engine, query, candidates, k)
    return doc_ids, np.asarray(features)


def run_queries(engine, queries, *, candidates=None, k=100, n_jobs=None,
                progress=False) -> dict:
    """A run ``{qid: {doc_id: score}}`` of ``engine`` for evaluation.

    Parameters
    ----------
    engine : SearchEngine
    queries : list of dict, or path
        ``{"id", "text", "category"?, "title"?, "body"?}`` (see
        :func:`cqa_search.evaluation.read_queries`; title and body: the query's two parts,
        which the per-field features compare with the questions'), or a queries file
        (read by it).
    candidates : dict or path, optional
        ``{qid: {doc_id: score}}`` (a run, or a TREC run file): rerank these candidates only (their scores
        are the ``given_*`` features); a query without candidates gets an empty
        ranking. Without candidates, the whole archive is searched (full retrieval,
        top ``k``); a query whose id is also an archived question's (e.g. a duplicate
        question used as a query) never retrieves itself.
    k : int or None, default 100
        Depth of full retrieval.
    n_jobs : int or None, default None
        Worker processes (-1: one per core; None or 1: this process); see
        :mod:`cqa_search.parallel`.
    progress : bool, default False
        Show a progress bar on stderr (this process only).

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
    queries, candidates = _inputs(queries, candidates)
    if n_workers(n_jobs, len(queries)) > 1:
        runs = map_queries(_run_one, queries, state=(engine, candidates, k), n_jobs=n_jobs)
        return {q["id"]: run for q, run in zip(queries, runs)}
    out = {}
    bar = progress_bar(progress, "evaluating", "queries")
    for query in queries:
        out[query["id"]] = _run_one((engine, candidates, k), query)
        bar.update()
    bar.close()
    return out


def feature_table(engine, queries, *, candidates=None, k=100, n_jobs=None, progress=False):
    """Features of (query, candidate) pairs, for training and analysing rankers.

    Candidates are the given ones (``candidates``, a run or a run file) or the top ``k`` of the
    retrieval model (full retrieval; a query never gets itself; without the columns of
    :data:`~cqa_search.features.GIVEN_FEATURES`, which only given candidates have). The
    engine's ranker is not applied: the candidates are those the ranker would reorder.
    ``n_jobs`` as :func:`run_queries`.

    Returns
    -------
    X : ndarray of shape (n_pairs, n_features)
    qid : ndarray of str, shape (n_pairs,)
    doc_ids : ndarray of str, shape (n_pairs,)
    feature_names : tuple of str
    """
    if engine.config.ranker is not None:
        engine = engine.with_config(replace(engine.config, ranker=None))
    if candidates is None:
        engine._check_k(k)
    queries, candidates = _inputs(queries, candidates)
    state = (engine, candidates, k)
    if n_workers(n_jobs, len(queries)) > 1:
        parts = map_queries(_features_one, queries, state=state, n_jobs=n_jobs)
    else:
        parts = []
        bar = progress_bar(progress, "candidates and their features", "queries", len(queries))
        for query in queries:
            parts.append(_features_one(state, query))
            bar.update()
        bar.close()
    blocks, qids, docs = [], [], []
    for query, (doc_ids, features) in zip(queries, parts):
        if doc_ids:
            blocks.append(features)
            qids.extend([query["id"]] * len(doc_ids))
            docs.extend(doc_ids)
    names = engine.feature_names
    X = np.vstack(blocks) if blocks else np.zeros((0, len(names)))
    if candidates is None:  # a ranker of free searches must not read them
        keep = [j for j, n in enumerate(names) if n not in GIVEN_FEATURES]
        X, names = X[:, keep], tuple(names[j] for j in keep)
    return X, np.array(qids, dtype=str), np.array(docs, dtype=str), names


def run_of_scores(qid, doc_ids, scores, *, order=None) -> dict:
    """A run ``{qid: {doc_id: score}}`` of one score per (query, document) pair, e.g. a
    ranker's predictions for the rows of :func:`feature_table`.

    Parameters
    ----------
    qid, doc_ids : sequence of str, shape (n_pairs,)
    scores : sequence of float, shape (n_pairs,)
    order : dict, optional
        A run (e.g. the given candidates): each query's documents in its order, which the
        evaluation keeps on tied scores (the ``semeval`` convention), instead of the
        order of the pairs; its documents without a pair are left out.

    Examples
    --------
    >>> run_of_scores(["q", "q", "r"], ["a", "b", "c"], [0.5, 2.0, 1.0])
    {'q': {'a': 0.5, 'b': 2.0}, 'r': {'c': 1.0}}
    >>> run_of_scores(["q", "q"], ["a", "b"], [1.0, 1.0], order={"q": {"b": 9, "a": 8}})
    {'q': {'b': 1.0, 'a': 1.0}}
    """
    run = {}
    for q, d, s in zip(qid, doc_ids, np.asarray(scores, dtype=np.float64).tolist()):
        run.setdefault(str(q), {})[str(d)] = s
    if order is None:
        return run
    return {q: {d: scored[d] for d in order.get(q, ()) if d in scored}
            for q, scored in run.items()}
