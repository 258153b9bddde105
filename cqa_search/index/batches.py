"""Analysing questions a batch at a time, in this thread or on analysis threads.

:class:`~cqa_search.index.term_index.TermIndexBuilder` hands the texts of a batch of
questions (every indexed field of each) to a :class:`BatchAnalysis` and merges what comes
back, batch after batch in order. Each thread that analyses batches numbers the terms it
meets itself ("local" term ids, a :class:`LocalTerms` each): a batch comes back as arrays
of local ids, with the tokens and terms that were new to that thread, in the order they
first occur. The builder maps those to the index's term ids. A token new to the whole
archive is new to whichever thread meets it first, so the builder sees the archive's new
tokens and terms in the archive's order, whatever thread analysed which batch, and gives
every term the id a single thread would give it: the index is the same bit for bit on any
number of threads.

What a batch costs is the tokenizing (:meth:`~cqa_search.analysis.Analyzer.word_runs`)
and the numbering of its tokens (a dictionary look-up per token, or one compiled pass
over the bytes: :func:`~cqa_search.compiled.number_tokens`), then a few numpy passes; on
analysis threads the reading and storing of the questions (the build's loop) runs beside
it.
"""
from __future__ import annotations

import sys
import threading
from array import array
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat

import numpy as np

from .. import compiled
from ..analysis import Analyzer
from ..parallel import n_workers

__all__ = ["BatchAnalysis", "BatchTerms", "LocalTerms"]

_SEPARATOR, _MISSING = -2, -9  # local ids of the text separator and of a token not met yet


class BatchTerms:
    """One analysed batch, in the local term ids of the process that analysed it.

    Attributes
    ----------
    new_tokens : list of (str, int)
        Tokens this process had not met before, in the order they first occur, with their
        local term id (-1: a stopword).
    new_terms : list of str
        The terms of the local ids this batch added, in id order.
    fields : list of tuple
        Per field: ``(sequence, doc_len, rows, terms, counts)``: the local term ids of the
        batch's texts in order (stopwords left out), each question's number of terms, and
        the (row in the batch, local term, count) of each distinct term of each question,
        by row.
    """

    __slots__ = ("new_tokens", "new_terms", "fields")

    def __init__(self, new_tokens, new_terms, fields):
        self.new_tokens, self.new_terms, self.fields = new_tokens, new_terms, fields


class LocalTerms:
    """The local term ids of one process and the analysis of batches with them.

    Tokens are numbered in the order this process first meets them (by a dictionary, or
    by the compiled :func:`~cqa_search.compiled.number_tokens` once the kernels run: the
    same numbers), and each new token is analysed once into a local term id.

    Parameters
    ----------
    analyzer : Analyzer
    """

    def __init__(self, analyzer: Analyzer):
        self.analyzer = analyzer
        # UTF-8 token -> token number (the dictionary), b"\x01" between texts of word runs
        self._numbers = {} if analyzer.shortest_run is None else {b"\x01": _SEPARATOR}
        self._tokens = []                       # token number -> UTF-8 token (dictionary)
        self._table = None                      # the compiled twin's TokenTable
        self._term_of = array("q")              # token number -> local term id (-1: none)
        self._terms = {}                        # term -> local term id

    def analyse(self, texts, n_fields) -> BatchTerms:
        """The terms of ``texts``: ``n_fields`` texts per question (its fields in order),
        question after question."""
        known = len(self._term_of)
        numbers = self._number(texts)
        new_tokens, new_terms = [], []
        shortest = self.analyzer.shortest_run
        term, terms, term_of = self.analyzer.term, self._terms, self._term_of
        for number in range(known, self._n_tokens()):  # in order of first occurrence
            word = self._token(number).decode()
            if shortest is not None and len(word) < shortest:
                term_of.append(-1)  # not a token: shorter than the pattern allows
                continue
            stem = term(word)
            if stem:
                tid = terms.get(stem)
                if tid is None:
                    tid = terms[stem] = len(terms)
                    new_terms.append(stem)
            else:
                tid = -1  # a stopword
            term_of.append(tid)
            new_tokens.append((word, tid))
        separator = numbers == _SEPARATOR
        if len(texts) and np.count_nonzero(separator) != len(texts) - 1:
            raise RuntimeError("a text separator was lost")  # (word_runs' contract)
        lookup = np.frombuffer(term_of, dtype=np.int64) if len(term_of) else np.zeros(1, int)
        ids = lookup[np.where(separator, 0, numbers)]
        ids[separator] = _SEPARATOR
        text = np.cumsum(separator)  # the text of each token
        keep = ids >= 0
        text, ids = text[keep], ids[keep]
        n = len(texts) // n_fields
        fields = []
        for f in range(n_fields):
            mine = slice(None) if n_fields == 1 else text % n_fields == f
            rows, sequence = text[mine] // n_fields, ids[mine]
            keys, counts = np.unique((rows << 32) | sequence, return_counts=True)
            fields.append((sequence.astype(np.int32),
                           np.bincount(rows, minlength=n).astype(np.int32),
                           (keys >> 32).astype(np.int32), (keys & 0xFFFFFFFF).astype(np.int32),
                           counts.astype(np.int32)))
        return BatchTerms(new_tokens, new_terms, fields)

    def _n_tokens(self):
        return len(self._tokens) if self._table is None else len(self._table)

    def _token(self, number) -> bytes:
        return self._tokens[number] if self._table is None else self._table.token(number)

    def _number(self, texts) -> np.ndarray:
        """The number of each token of ``texts`` (-2: between two texts)."""
        runs = self.analyzer.word_runs(texts)
        if runs is None:  # another token pattern: its regular expression, text by text
            tokens = [[t.encode() for t in self.analyzer.tokenize(text)] for text in texts]
            numbers = self._by_dictionary([t for each in tokens for t in each])
            between = np.cumsum([len(each) for each in tokens], dtype=np.int64)[:-1]
            return np.insert(numbers, between, _SEPARATOR)
        if compiled.active() == "numba":
            if self._table is None:  # the tokens met so far first: the same numbers
                self._table = compiled.TokenTable()
                compiled.number_tokens(self._table, b" ".join(self._tokens))
                self._numbers, self._tokens = None, None
            return compiled.number_tokens(self._table, runs)
        return compiled.timed(self._by_dictionary, runs.split())

    def _by_dictionary(self, tokens) -> np.ndarray:
        if self._table is not None:  # (the kernels were set aside: back to a dictionary)
            self._tokens = [self._table.token(i) for i in range(len(self._table))]
            self._numbers = {b"\x01": _SEPARATOR, **{t: i for i, t in enumerate(self._tokens)}}
            self._table = None
        numbers = self._numbers
        out = np.fromiter(map(numbers.get, tokens, repeat(_MISSING)), dtype=np.int64,
                          count=len(tokens))
        missing = np.flatnonzero(out == _MISSING)
        if len(missing):
            found = [tokens[i] for i in missing.tolist()]
            for token in dict.fromkeys(found):
                if token not in numbers:
                    numbers[token] = len(self._tokens)
                    self._tokens.append(token)
            out[missing] = [numbers[t] for t in found]
        return out


class BatchAnalysis:
    """Batches analysed in order, in this thread or on analysis threads.

    Parameters
    ----------
    analyzer : Analyzer
    n_fields : int
        Texts per question.
    n_jobs : int or None
        Threads at work in all, this one included (-1: one per core, as
        :func:`cqa_search.parallel.n_workers`); 1 or None: this thread alone.
    serial_batches : int
        Batches analysed here before the threads start (a small archive never starts
        them, nor loads the compiled kernels).

    Notes
    -----
    The analysis threads run the compiled kernels, which release the interpreter lock
    (:func:`~cqa_search.compiled.number_tokens`), and numpy, which mostly does: they work
    while this thread reads and stores the next questions, and nothing is copied between
    processes. Without the kernels (:func:`cqa_search.compiled.use` ``"numpy"``) a batch
    holds the lock throughout, so this thread analyses them itself. :meth:`submit` returns
    the results ready so far, each ``(key, BatchTerms)`` where ``key`` names the
    :class:`LocalTerms` whose ids it holds, in the order the batches were submitted (each
    thread takes the batches in that order); :meth:`finish` returns the rest. At most two
    batches per thread are in flight.
    """

    def __init__(self, analyzer, n_fields, n_jobs=None, serial_batches=2):
        self.analyzer, self.n_fields = analyzer, n_fields
        self.n_threads = n_workers(n_jobs, sys.maxsize) - 1
        self.serial_batches = serial_batches
        self._local = LocalTerms(analyzer)
        self._n_submitted = 0
        self._executor = None
        self._threads = threading.local()  # each analysis thread's LocalTerms
        self._pending = deque()

    def submit(self, texts) -> list:
        """Analyse the texts of one batch; the results ready now, in order."""
        self._n_submitted += 1
        if self.n_threads and self._n_submitted > self.serial_batches:
            if self._executor is None:
                self._start()
        if self._executor is None:
            return [(self._local, self._local.analyse(texts, self.n_fields))]
        self._pending.append(self._executor.submit(self._analyse_in_thread, texts))
        ready = []
        while self._pending and (len(self._pending) > 2 * self.n_threads
                                 or self._pending[0].done()):
            ready.append(self._pending.popleft().result())
        return ready

    def finish(self) -> list:
        """The results of every batch still in flight, in order; the threads stop."""
        try:
            return [self._pending.popleft().result() for _ in range(len(self._pending))]
        finally:
            self.close()

    def close(self) -> None:
        """Stop the threads (results not taken are lost)."""
        if self._executor is not None:
            for future in self._pending:
                future.cancel()
            self._pending.clear()
            self._executor.shutdown()
            self._executor = None

    def _start(self):
        # an archive worth the threads is worth the kernels, without which they would
        # only take turns with this thread
        if compiled.load():
            self._executor = ThreadPoolExecutor(self.n_threads,
                                                thread_name_prefix="cqa-search-analysis")
        else:
            self.n_threads = 0

    def _analyse_in_thread(self, texts):
        local = getattr(self._threads, "terms", None)
        if local is None:  # its own analyzer: a cache of its own
            local = self._threads.terms = LocalTerms(
                Analyzer.from_config(self.analyzer.to_config()))
        return local, local.analyse(texts, self.n_fields)
