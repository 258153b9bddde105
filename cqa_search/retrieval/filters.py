"""Filters of a typed query (:mod:`cqa_search.query_parser`) over the archive's rows.

A unit (words in a field, perhaps a phrase) matches the rows holding all its words in
that field: from the postings for an indexed field, then, for a phrase, checked on the
rows' term sequences; for the title or the body of the question (parts of the indexed
``question`` field), the postings of ``question`` give the rows to check and the analysed
title or body decides. Words are analysed like the archive, so "renewing" matches
"renewal"'s stem. An exact tag (``tag:``) and the dates (``date:``) are matched on the
questions' attributes (:class:`~cqa_search.index.attributes.QuestionAttributes`).
"""
from __future__ import annotations

import numpy as np

from .base import matching

__all__ = ["apply_filters"]

# Field prefix of the syntax (query_parser.FIELD_PREFIXES; "question" without one) -> (its
# own indexed field, an indexed field that holds it, the part of a question to re-check
# when only the latter is indexed).
_FIELD = {"question": ("question", None, None), "title": ("title", "question", "title"),
          "body": ("body", "question", "body"), "answers": ("answers", None, "answers"),
          "tags": ("tags", None, "tags")}


def _contains(sequence, phrase) -> bool:
    n = len(phrase)
    return any(sequence[i:i + n] == phrase for i in range(len(sequence) - n + 1)
               if sequence[i] == phrase[0])


def _text(question, part) -> str:
    if part == "tags":
        return " ".join(question.tags)
    if part == "answers":
        return "\n".join(question.answers)
    return getattr(question, part)


def _unit_rows(unit, allowed, index, archive, analyzer, attributes) -> np.ndarray:
    """Mask of the ``allowed`` rows that match ``unit``."""
    if unit.field == "tag":  # one exact tag
        return allowed & attributes().tag_mask(" ".join(unit.words))
    own, holder, part = _FIELD[unit.field]
    terms = [t for w in unit.words for t in analyzer.analyze(w)]
    if not terms:  # only stopwords: no constraint
        return allowed.copy()
    ids = index.vocab.ids(terms)
    if (ids < 0).any():  # a word the archive does not have
        return np.zeros_like(allowed)
    field = index.fields.get(own) or index.fields.get(holder)
    mask = allowed.copy()
    if field is not None:
        for t in np.unique(ids):
            mask &= matching(field, np.array([t]))
        if field.name == own:
            part = None
    phrase = ids.tolist()
    if part is None and not (unit.phrase and len(phrase) > 1):
        return mask
    for row in np.flatnonzero(mask).tolist():
        if part is None:
            seq = field.terms_of(row).tolist()
        else:
            seq = index.vocab.ids(analyzer.analyze(_text(archive[row], part))).tolist()
        if not (_contains(seq, phrase) if unit.phrase else set(phrase) <= set(seq)):
            mask[row] = False
    return mask


def apply_filters(parsed, mask, index, archive, analyzer, attributes=None) -> np.ndarray:
    """``mask`` narrowed to the rows that pass the filters of ``parsed``.

    Parameters
    ----------
    parsed : ParsedQuery
    mask : ndarray of bool, shape (n_docs,)
        The rows allowed so far (e.g. matching the query, in the wanted category).
    index : TermIndex
    archive : Archive
    analyzer : Analyzer
    attributes : callable, optional
        Gives the rows' :class:`~cqa_search.index.attributes.QuestionAttributes` (called
        only for a ``tag:`` or ``date:`` filter).
    """
    mask = mask.copy()
    for low, high in parsed.dates:
        mask &= attributes().date_mask(low, high)
    for units in parsed.must:
        allowed = mask.copy()
        any_of = np.zeros_like(mask)
        for unit in units:
            any_of |= _unit_rows(unit, allowed, index, archive, analyzer, attributes)
        mask &= any_of
    for units in parsed.must_not:
        every = mask.copy()
        for unit in units:
            every &= _unit_rows(unit, every, index, archive, analyzer, attributes)
        mask &= ~every
    return mask
