"""Ranking metrics (MAP, MRR, P@k, R@k, nDCG@k) under two conventions.

A *run* maps each query id to its scored documents, ``{qid: {doc_id: score}}``, in the
order the documents were produced (a dict keeps insertion order; a TREC run file read by
:func:`~cqa_search.evaluation.trec.read_run` keeps file order). *qrels* map
``{qid: {doc_id: relevance}}``; a document is relevant when its relevance is at least
``relevance_threshold`` (1).

Conventions (``convention=``; by default the protocol's, :func:`protocol_convention`: the
one rule of :func:`evaluate` and of ``cqa-search evaluate``):

``"semeval"`` — the official SemEval-2016 Task 3 scorer:
    documents sorted by score, descending, ties kept in run order (a stable sort); only
    the top 10 count; AP is the mean of precision@i over the ranks i <= 10 holding a
    relevant document; every query of the qrels counts, and a query with no relevant
    document retrieved (or absent from the run) scores 0 on every metric.

``"trec"`` — trec_eval (and pytrec_eval):
    sorted by score (in single precision, as trec_eval reads it), descending, ties by doc
    id *descending*; all retrieved documents count; AP divides by the number of relevant documents in the qrels; only queries
    present both in the run and in the qrels are evaluated.

Metric names: ``map``, ``mrr``, ``p@k``, ``r@k`` (recall), ``success@k`` (1 when a
relevant document is in the top ``k``, else 0: trec_eval's ``success``), ``ndcg@k``
(linear gains, log2 discount, as trec_eval's ``ndcg_cut``), for any positive integer ``k``.
"""
from __future__ import annotations

import numpy as np

from ..exceptions import ParameterError
from .trec import as_qrels, as_run, rank_documents

__all__ = ["CONVENTIONS", "evaluate", "summarize", "parse_metric", "judged_only",
           "protocol_convention"]

CONVENTIONS = ("semeval", "trec")
_SEMEVAL_DEPTH = 10


def protocol_convention(rerank: bool) -> str:
    """The convention of an evaluation protocol (the default of :func:`evaluate` and of
    ``cqa-search evaluate``).

    A rerank of given candidates (each query's candidates fixed beforehand, as SemEval's
    ten related questions; ``evaluate --candidates``) is scored as the official SemEval
    scorer does (``"semeval"``); a search of the whole archive, or any other run, as
    trec_eval does (``"trec"``), whose AP counts the relevant documents the run never
    retrieved: a full retrieval is judged on finding them, a rerank cannot.

    Examples
    --------
    >>> protocol_convention(rerank=True), protocol_convention(rerank=False)
    ('semeval', 'trec')
    """
    return "semeval" if rerank else "trec"


def parse_metric(name: str):
    """``(kind, k)`` of a metric name (``k`` is None for map and mrr).

    Examples
    --------
    >>> parse_metric("P@5"), parse_metric("map")
    (('p', 5), ('map', None))
    """
    key = str(name).strip().lower()
    if key in ("map", "mrr"):
        return key, None
    kind, sep, k = key.partition("@")
    if sep and kind in ("p", "r", "success", "ndcg") and k.isascii() and k.isdigit() \
            and int(k) >= 1:
        return kind, int(k)
    raise ParameterError(f"metric must be map, mrr, p@K, r@K, success@K or ndcg@K "
                         f"(K >= 1); got {name!r}")


def _query_metrics(ranked, judged, metrics, convention, threshold):
    gains = np.array([judged.get(d, 0) for d in ranked], dtype=np.float64)
    rel = gains >= threshold
    if convention == "semeval":
        rel = rel[:_SEMEVAL_DEPTH]
        n_rel = int(rel.sum())  # the official AP divides by the relevant ones retrieved
    else:
        n_rel = sum(1 for g in judged.values() if g >= threshold)
    hits = np.cumsum(rel)
    ranks = np.arange(1, len(rel) + 1)
    out = {}
    for name, (kind, k) in metrics.items():
        if kind == "map":
            out[name] = float((hits[rel] / ranks[rel]).sum() / n_rel) if n_rel else 0.0
        elif kind == "mrr":
            out[name] = float(1.0 / (np.argmax(rel) + 1)) if rel.any() else 0.0
        elif kind == "p":
            out[name] = float(rel[:k].sum() / k)
        elif kind == "r":
            out[name] = float(rel[:k].sum() / n_rel) if n_rel else 0.0
        elif kind == "success":
            out[name] = float(rel[:k].any())
        else:  # ndcg: linear gains of relevant documents, log2 discount
            g = np.where(gains >= threshold, gains, 0.0)
            if convention == "semeval":
                g = g[:_SEMEVAL_DEPTH]
            disc = 1.0 / np.log2(np.arange(2, k + 2))
            dcg = float((g[:k] * disc[: len(g[:k])]).sum())
            ideal = np.sort([v for v in judged.values() if v >= threshold])[::-1][:k]
            idcg = float((np.asarray(ideal, dtype=np.float64) * disc[: len(ideal)]).sum())
            out[name] = dcg / idcg if idcg > 0 else 0.0
    return out


def evaluate(run: dict, qrels: dict, *, metrics=("map", "mrr", "p@1", "p@5", "p@10"),
             convention=None, rerank=False, relevance_threshold=1):
    """Per-query metrics of a run.

    Parameters
    ----------
    run : dict or path
        ``{qid: {doc_id: score}}`` in production order (see the module docstring), or a
        TREC run file (read by :func:`~cqa_search.evaluation.trec.read_run`).
    qrels : dict or path
        ``{qid: {doc_id: relevance}}``, or a qrels file (read by
        :func:`~cqa_search.evaluation.trec.read_qrels`).
    metrics : sequence of str
    convention : {"semeval", "trec"} or None, default None
        None: the protocol's (:func:`protocol_convention`): ``"semeval"`` when ``rerank``,
        else ``"trec"``.
    rerank : bool, default False
        The run reorders given candidates (e.g. SemEval's ten related questions per
        query) rather than searching the whole archive.
    relevance_threshold : int, default 1

    Returns
    -------
    pandas.DataFrame
        One row per evaluated query (index ``qid``, sorted), one column per metric.

    Examples
    --------
    >>> run = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}}
    >>> qrels = {"q1": {"b": 1, "c": 1}, "q2": {"x": 1}}
    >>> evaluate(run, qrels, metrics=["map"]).round(4).to_dict("index")  # trec: q1 only
    {'q1': {'map': 0.5833}}
    >>> evaluate(run, qrels, metrics=["map", "mrr"], rerank=True).round(4).to_dict("index")
    {'q1': {'map': 0.5833, 'mrr': 0.5}, 'q2': {'map': 0.0, 'mrr': 0.0}}

    (a rerank: the SemEval convention, where q2 counts, as 0)
    """
    import pandas as pd  # imported here: the rest of the package runs without pandas

    if convention is None:
        convention = protocol_convention(rerank)
    if convention not in CONVENTIONS:
        raise ParameterError(f"convention must be one of {{'semeval', 'trec'}} or None; got "
                             f"{convention!r}")
    run, qrels = as_run(run), as_qrels(qrels)
    parsed = {m: parse_metric(m) for m in metrics}
    if convention == "semeval":
        qids = sorted(qrels)
    else:
        qids = sorted(set(run) & set(qrels))
    rows = [_query_metrics(rank_documents(run.get(q, {}), convention), qrels[q], parsed,
                           convention, relevance_threshold) for q in qids]
    df = pd.DataFrame(rows, index=pd.Index(qids, name="qid"), columns=list(parsed))
    return df


def summarize(per_query, *, percent=False):
    """Mean of every metric over the queries (times 100 when ``percent``)."""
    mean = per_query.mean(axis=0) if len(per_query) else per_query.sum(axis=0) * np.nan
    return mean * 100 if percent else mean


def judged_only(run: dict, qrels: dict) -> dict:
    """The run with only the documents judged for their query (a *condensed list*, Sakai
    2007): evaluating it measures a system on the judged documents alone, so that
    unjudged ones it retrieves (judgments pooled from another system) do not count as
    non-relevant.

    Examples
    --------
    >>> judged_only({"q": {"a": 3.0, "x": 2.0, "b": 1.0}}, {"q": {"a": 0, "b": 1}})
    {'q': {'a': 3.0, 'b': 1.0}}
    """
    return {q: {d: s for d, s in docs.items() if d in qrels.get(q, {})}
            for q, docs in run.items()}
