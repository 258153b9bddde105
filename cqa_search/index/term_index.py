"""Sparse term index: per field, a doc x term count matrix in CSC form plus statistics.

A field is a piece of text of every question: ``question`` (title and body), ``answers``
(all answers joined), and optionally ``title``, ``body``, ``best_answer``. Each field
gets its own :class:`FieldIndex` over the one shared :class:`~.vocab.Vocabulary`.

CSC (term-major) is the posting-list layout: the rows holding term ``t`` are
``indices[indptr[t]:indptr[t + 1]]`` (sorted), so a query touches only its own terms.
"""
from __future__ import annotations

from array import array
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..archive import Question
from ..exceptions import ParameterError, QueryError
from .batches import BatchAnalysis
from .vocab import Vocabulary

__all__ = ["FIELDS", "PARTS", "CollectionStats", "FieldIndex", "CombinedField", "TermIndex",
           "TermIndexBuilder", "combine_fields", "part_fields"]

#: Field name -> text of a question for that field.
FIELDS = {
    "question": lambda q: q.text,
    "title": lambda q: q.title,
    "body": lambda q: q.body,
    "answers": lambda q: "\n".join(q.answers),
    "tags": lambda q: " ".join(q.tags),
    "best_answer": lambda q: q.best_answer_text or "",
}
#: The parts of a question one :class:`CombinedField` can hold, and the indexed fields each
#: is read from: the body is the ``question`` field (title and body) less the ``title``.
PARTS = {"title": ("title",), "body": ("question", "title"), "answers": ("answers",)}


class CollectionStats:
    """The collection statistics of a field that the term models read.

    By default those of the field's own documents; an index split in parts (shards,
    segments) gives each part the statistics of the whole collection, so that every part
    scores exactly as one index would.

    Parameters
    ----------
    n_docs : int
        Documents of the collection.
    df : ndarray of int64, shape (n_terms,)
        Documents holding each term.
    term_freq : ndarray of int64, shape (n_terms,)
        Occurrences of each term.
    total_terms : int
        Occurrences of every term (the collection's length).

    Examples
    --------
    >>> a = CollectionStats(2, np.array([1, 2]), np.array([1, 3]), 4)
    >>> b = a + CollectionStats(1, np.array([0, 1]), np.array([0, 1]), 1)
    >>> b.n_docs, b.df.tolist(), b.avg_doc_len, b.collection_prob.tolist()
    (3, [1, 3], 1.6666666666666667, [0.2, 0.8])
    >>> c = (b - a).padded(3)
    >>> c.n_docs, c.df.tolist(), c.term_freq.tolist(), c.total_terms
    (1, [0, 1, 0], [0, 1, 0], 1)
    """

    def __init__(self, n_docs, df, term_freq, total_terms):
        self.n_docs, self.total_terms = int(n_docs), int(total_terms)
        self.df, self.term_freq = df, term_freq
        self._prob = None

    @classmethod
    def of(cls, field) -> "CollectionStats":
        """The statistics of a field's own documents."""
        indptr = np.asarray(field.indptr)
        tf = np.zeros(len(indptr) - 1, dtype=np.int64)
        some = np.flatnonzero(indptr[1:] > indptr[:-1])  # (reduceat needs non-empty slices)
        if len(some):
            tf[some] = np.add.reduceat(field.counts, indptr[some], dtype=np.int64)
        return cls(field.n_docs, np.diff(indptr), tf, field.total_terms)

    def __add__(self, other) -> "CollectionStats":
        """The statistics of two disjoint collections over one vocabulary (``other``'s
        vocabulary may be a prefix of this one's or the reverse)."""
        n = max(len(self.df), len(other.df))

        def pad(a):
            return np.pad(np.asarray(a, dtype=np.int64), (0, n - len(a)))
        return CollectionStats(self.n_docs + other.n_docs, pad(self.df) + pad(other.df),
                               pad(self.term_freq) + pad(other.term_freq),
                               self.total_terms + other.total_terms)

    def __sub__(self, other) -> "CollectionStats":
        """The statistics of this collection without ``other``, a part of it (whose
        vocabulary may be a prefix of this one's)."""
        n = len(self.df)

        def pad(a):
            return np.pad(np.asarray(a, dtype=np.int64), (0, n - len(a)))
        return CollectionStats(self.n_docs - other.n_docs,
                               np.asarray(self.df, dtype=np.int64) - pad(other.df),
                               np.asarray(self.term_freq, dtype=np.int64)
                               - pad(other.term_freq), self.total_terms - other.total_terms)

    def padded(self, n_terms) -> "CollectionStats":
        """These statistics over a vocabulary of ``n_terms``, a prefix of which is theirs
        (the terms beyond it occur nowhere)."""
        return self + CollectionStats(0, np.zeros(n_terms, np.int64),
                                      np.zeros(n_terms, np.int64), 0)

    @property
    def avg_doc_len(self) -> float:
        return self.total_terms / max(self.n_docs, 1)

    @property
    def collection_prob(self) -> np.ndarray:
        """``term_freq / total_terms``: the background model P(t|C)."""
        if self._prob is None:
            self._prob = self.term_freq / max(self.total_terms, 1)
        return self._prob


class FieldIndex:
    """Postings and statistics of one field.

    The postings are kept as three plain arrays (what is stored on disk, possibly
    memory-mapped) rather than a scipy matrix, whose constructor would scan and copy
    them; :meth:`matrix` builds the scipy view when a model needs one.

    Parameters
    ----------
    name : str
    indptr : ndarray of int64, shape (n_terms + 1,)
    indices : ndarray of int32, shape (nnz,)
        Rows of each term's postings, sorted within a term.
    counts : ndarray of int32, shape (nnz,)
        Term counts aligned with ``indices``.
    doc_len : ndarray of int32, shape (n_docs,)
        Number of terms of each document in this field.
    sequence : ndarray of int32, shape (total_terms,)
        The term ids of every document in text order (stopwords removed), documents
        one after the other: what order-aware models (phrase translation) read.
    stats : CollectionStats, optional
        The collection statistics the models score with (default: this field's own).

    Attributes
    ----------
    df : ndarray of int64, shape (n_terms,)
        Document frequency of each term in this field's documents.
    stats : CollectionStats
        The collection statistics (document frequencies, P(t|C), average length) that
        term models score with.
    """

    def __init__(self, name, indptr, indices, counts, doc_len, sequence, stats=None):
        self.name = name
        self.indptr = indptr
        self.indices = indices
        self.counts = counts
        self.doc_len = doc_len
        self.sequence = sequence
        self._offsets = None
        self._rows = None
        self._derived = {}
        self._stats = stats

    @property
    def n_docs(self) -> int:
        return len(self.doc_len)

    @property
    def n_terms(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    @property
    def total_terms(self) -> int:
        return int(self.doc_len.sum(dtype=np.int64))

    @property
    def df(self) -> np.ndarray:
        return np.diff(self.indptr)

    @property
    def stats(self) -> CollectionStats:
        if self._stats is None:
            self._stats = CollectionStats.of(self)
        return self._stats

    @classmethod
    def concat(cls, parts, n_terms) -> "FieldIndex":
        """One field over the rows of ``parts`` one after the other (segments of an index,
        over one vocabulary; a part may know fewer terms than ``n_terms``).

        The postings of term ``t`` are those of every part in turn, with their rows
        shifted: the merge is a few passes of vectorised copies.
        """
        parts = list(parts)
        if len(parts) == 1 and parts[0].n_terms == n_terms:
            return parts[0]
        counts_by_part = [np.pad(np.diff(p.indptr).astype(np.int64), (0, n_terms - p.n_terms))
                          for p in parts]
        per_term = np.sum(counts_by_part, axis=0) if parts else np.zeros(n_terms, np.int64)
        indptr = np.concatenate(([0], np.cumsum(per_term))).astype(np.int64)
        nnz = int(indptr[-1])
        indices = np.empty(nnz, dtype=np.int32)
        counts = np.empty(nnz, dtype=np.int32)
        before = np.zeros(n_terms, dtype=np.int64)  # postings of earlier parts, per term
        row0 = 0
        for part, sizes in zip(parts, counts_by_part):
            k = part.nnz
            if k:
                # posting j of term t goes to indptr[t] + before[t] + (j - part.indptr[t])
                start = np.asarray(part.indptr[:-1], dtype=np.int64)
                shift = indptr[:part.n_terms] + before[:part.n_terms] - start
                dest = np.arange(k, dtype=np.int64)
                dest += np.repeat(shift, sizes[:part.n_terms])
                indices[dest] = np.asarray(part.indices) + row0
                counts[dest] = part.counts
            before += sizes
            row0 += part.n_docs
        doc_len = np.concatenate([np.asarray(p.doc_len) for p in parts]).astype(np.int32)
        sequence = np.concatenate([np.asarray(p.sequence) for p in parts]).astype(np.int32)
        return cls(parts[0].name if parts else "", indptr, indices, counts, doc_len, sequence)

    def select(self, rows) -> "FieldIndex":
        """The field over ``rows`` only (in that order), with its own statistics: what a
        compaction keeps, or a per-question model carries to the rows it keeps."""
        rows = np.asarray(rows, dtype=np.int64)
        m = self.rows_matrix()[rows].tocsc()
        m.sort_indices()
        lengths = np.asarray(self.doc_len)[rows]
        return FieldIndex(self.name, m.indptr.astype(np.int64), m.indices.astype(np.int32),
                          m.data.astype(np.int32), lengths.astype(np.int32),
                          self.sequences_of(rows)[0].astype(np.int32))

    def with_stats(self, stats: CollectionStats) -> "FieldIndex":
        """The same postings scored with the statistics of a larger collection (a new
        object: weights derived from other statistics are kept apart)."""
        if len(stats.df) != self.n_terms:
            raise ValueError(f"statistics over {len(stats.df)} terms for a field of "
                             f"{self.n_terms}")
        return FieldIndex(self.name, self.indptr, self.indices, self.counts, self.doc_len,
                          self.sequence, stats=stats)

    def derived(self, key: str, compute):
        """An array derived from this field by a model (posting weights, idf, norms).

        ``compute()`` runs on the first call for ``key`` (a model's
        :meth:`~cqa_search.retrieval.TermModel.cache_key` plus what the array is); later
        calls return the same array. Stored weights are registered with
        :meth:`store_weights` when the index is opened.
        """
        value = self._derived.get(key)
        if value is None:
            value = self._derived[key] = compute()
        return value

    def store_weights(self, key: str, weights) -> None:
        """Register posting weights read from the index (keyed like :meth:`derived`)."""
        self._derived[key] = weights

    def postings_of(self, term_id):
        """(rows, counts) of one term."""
        lo, hi = self.indptr[term_id], self.indptr[term_id + 1]
        return self.indices[lo:hi], self.counts[lo:hi]

    @property
    def offsets(self) -> np.ndarray:
        """int64 offsets of the documents in :attr:`sequence`, shape (n_docs + 1,)."""
        if self._offsets is None:
            self._offsets = np.concatenate(([0], np.cumsum(self.doc_len, dtype=np.int64)))
        return self._offsets

    def terms_of(self, row) -> np.ndarray:
        """Term ids of document ``row`` in text order."""
        offsets = self.offsets
        return self.sequence[offsets[row]:offsets[row + 1]]

    def sequences_of(self, rows):
        """The term ids of documents ``rows`` one after the other, and the position in
        ``rows`` of each: ``(terms, positions)``, both int64."""
        rows = np.asarray(rows, dtype=np.int64)
        offsets = self.offsets
        starts = offsets[rows]
        lengths = offsets[rows + 1] - starts
        ends = np.cumsum(lengths)
        gather = np.repeat(starts - (ends - lengths), lengths) + np.arange(
            ends[-1] if len(ends) else 0, dtype=np.int64)
        return (np.asarray(self.sequence)[gather].astype(np.int64),
                np.repeat(np.arange(len(rows), dtype=np.int64), lengths))

    def rows_matrix(self):
        """Counts as a CSR matrix (document-major), built once from the postings."""
        if self._rows is None:
            self._rows = self.matrix().tocsr()
        return self._rows

    def matrix(self, data=None):
        """The postings as a scipy CSC matrix (n_docs, n_terms) of ``data`` (counts)."""
        import scipy.sparse as sp  # on first use: searching never needs scipy

        data = self.counts if data is None else data
        return sp.csc_matrix((data, self.indices, self.indptr), shape=(self.n_docs, self.n_terms))


class CombinedField(FieldIndex):
    """Parts of every question (title, body, answers) as one field: the postings of the
    documents holding a term in any of the parts, each with the term's count in every
    part (BM25F's combined field, :class:`~cqa_search.retrieval.bm25f.BM25F`). Made by
    :func:`combine_fields`; the term models' kernels read its postings as a field's.

    Parameters
    ----------
    parts : tuple of str
        Among :data:`PARTS`, in that order.
    indptr : ndarray of int64, shape (n_terms + 1,)
    indices : ndarray of int32, shape (nnz,)
        As a field's.
    counts : ndarray of int32, shape (nnz, n_parts)
        Unlike a field's, one column per part: the count of the posting's term in that
        part of its document (0: not there).
    part_len : ndarray of int32, shape (n_docs, n_parts)
        Terms of each part of every document (``doc_len`` is their sum).
    part_avg_len : ndarray of float64, shape (n_parts,)
        Each part's average length over the collection (from the fields' statistics: the
        whole index's for a segment or a shard).
    stats : CollectionStats
        The combined field's statistics (:func:`combine_fields`).
    """

    def __init__(self, parts, indptr, indices, counts, part_len, part_avg_len, stats):
        super().__init__("+".join(parts), indptr, indices, counts,
                         part_len.sum(axis=1, dtype=np.int64).astype(np.int32), None, stats)
        self.parts = tuple(parts)
        self.part_len = part_len
        self.part_avg_len = part_avg_len


def combine_fields(fields, parts) -> CombinedField:
    """The ``parts`` of every question as one :class:`CombinedField`, from an index's
    fields (made on first use, then kept by the first field it reads).

    Its postings are the union of the parts' postings, each part's counts aligned to
    them; when they are one field's own (the ``question`` field's for the title and the
    body: the question's postings hold the title's), the combined field shares them,
    and the posting weights derived or stored for that field. Its statistics come from
    the fields' (so they are the whole index's for a segment or a shard): each part's
    average length (the body's: the question's total less the title's) and, as
    document frequency of a term, the documents holding it in any of the parts: exact
    for the title and the body together (the ``question`` field's), for the title alone
    and for the answers alone; the body alone takes the question's (an upper bound);
    the answers beside a part of the question take the larger of the two (a lower
    bound of the union: per-field statistics cannot count it, and Lucene's
    ``combined_fields`` does the same).

    Parameters
    ----------
    fields : TermIndex or mapping of str to FieldIndex
        The index's fields, with the statistics they are scored with.
    parts : sequence of str
        Distinct names among :data:`PARTS`.

    Raises
    ------
    ParameterError
        Unknown or repeated parts, none, or titles whose terms are not all the
        question's (an analyzer whose tokens span the title and the body).
    QueryError
        ``fields`` lacks a field the parts are read from.

    Examples
    --------
    >>> from cqa_search import Question
    >>> builder = TermIndexBuilder(__import__("cqa_search").Analyzer(),
    ...                            ("question", "title", "answers"))
    >>> builder.add(Question("a", "Renew a visa", "How do I renew my visa?"))
    >>> combined = combine_fields(builder.build(), ["title", "body"])
    >>> combined.name, combined.counts.tolist(), combined.part_len.tolist()
    ('title+body', [[1, 1], [1, 1]], [[2, 2]])
    """
    given = list(parts)
    parts = tuple(p for p in PARTS if p in given)
    if not parts or len(parts) != len(given):
        raise ParameterError(f"parts must be distinct names among {{{', '.join(PARTS)}}}; "
                             f"got {given!r}")
    sources = part_fields(parts)
    missing = [f for f in sources if f not in fields]
    if missing:
        names = ", ".join(fields.fields if isinstance(fields, TermIndex) else fields)
        raise QueryError(f"the {' and '.join(parts)} of the questions are read from the "
                         f"field {missing[0]!r}, which this index lacks (fields: {names}); "
                         "build the index again with it (`cqa-search build-index` indexes "
                         "the titles by default)")
    host = fields[sources[0]]
    return host.derived("combined:" + "+".join(parts),
                        lambda: _combine({f: fields[f] for f in sources}, parts, host))


def part_fields(parts) -> tuple:
    """The indexed fields that ``parts`` (names of :data:`PARTS`) are read from.

    Examples
    --------
    >>> part_fields(["body", "answers"])
    ('question', 'title', 'answers')
    """
    return tuple(f for f in ("question", "title", "answers")
                 if any(f in PARTS[p] for p in parts))


def _aligned(union, field) -> np.ndarray:
    """The counts of ``field`` at the postings of ``union`` (a CSC matrix of counts whose
    postings hold the field's; a canonical sum keeps them sorted, without duplicates)."""
    both = union + field.matrix()
    if both.nnz != union.nnz:
        raise ParameterError(f"the terms of the {field.name} field are not all terms of the "
                             "question field (an analyzer whose tokens span the title and "
                             "the body?): its parts cannot be combined")
    return (both.data - union.data).astype(np.int32)


def _combine(fi, parts, host) -> CombinedField:
    """:func:`combine_fields` of the fields ``fi`` (name -> FieldIndex, those the parts
    are read from)."""
    base = [f for f in fi if not (f == "title" and "question" in fi)]  # whose union it is
    counts = {}
    if len(base) == 1:
        indptr, indices = fi[base[0]].indptr, fi[base[0]].indices
        counts[base[0]] = np.asarray(fi[base[0]].counts)
        union = fi[base[0]].matrix() if len(fi) > 1 else None
    else:
        union = fi[base[0]].matrix() + fi[base[1]].matrix()
        indptr, indices = union.indptr.astype(np.int64), union.indices.astype(np.int32)
    for f in fi:
        if f not in counts:
            counts[f] = _aligned(union, fi[f])
    st = {f: fi[f].stats for f in fi}
    n = st[next(iter(fi))].n_docs
    columns, lengths, totals, freqs = [], [], [], []
    for part in parts:
        if part == "body":
            columns.append(counts["question"] - counts["title"])
            lengths.append(np.asarray(fi["question"].doc_len) - fi["title"].doc_len)
            totals.append(st["question"].total_terms - st["title"].total_terms)
            freqs.append(np.asarray(st["question"].term_freq) - st["title"].term_freq)
        else:
            columns.append(counts[part])
            lengths.append(np.asarray(fi[part].doc_len))
            totals.append(st[part].total_terms)
            freqs.append(np.asarray(st[part].term_freq))
    matrix = np.stack(columns, axis=1)
    keep = None
    if "body" in parts and "title" not in parts:  # the question's postings of title words
        keep = (matrix > 0).any(axis=1)
        if keep.all():
            keep = None
    if keep is not None:
        indptr = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))[indptr]
        indices, matrix = np.asarray(indices)[keep], matrix[keep]
    question_parts = [p for p in parts if p != "answers"]
    df = None if not question_parts else np.asarray(
        st["title" if question_parts == ["title"] else "question"].df, dtype=np.int64)
    if "answers" in parts:
        answers_df = np.asarray(st["answers"].df, dtype=np.int64)
        df = answers_df if df is None else np.maximum(df, answers_df)
    stats = CollectionStats(n, df, sum(freqs), sum(totals))
    combined = CombinedField(parts, indptr, indices, matrix,
                             np.stack(lengths, axis=1).astype(np.int32),
                             np.array(totals, dtype=np.float64) / max(n, 1), stats)
    if keep is None and indices is host.indices:
        combined._derived = host._derived  # the same postings: the same posting weights
    return combined


#: Up to this many postings a build orders them with numpy; beyond, with scipy's
#: linear-time conversion (4x faster at 10 million, but importing scipy.sparse costs ~0.2 s:
#: more than a small build or a live addition of questions takes).
NUMPY_ORDER_LIMIT = 1 << 20


def _by_term(rows, terms, counts, n_docs, n_terms):
    """``(indptr, indices, counts)`` of postings given as ``(row, term, count)`` entries
    (rows non-decreasing, each (row, term) once), ordered by term, then row."""
    if len(rows) <= NUMPY_ORDER_LIMIT:
        order = np.argsort(terms, kind="stable")  # rows stay in order within a term
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=n_terms), out=indptr[1:])
        return indptr, rows[order].astype(np.int32), counts[order].astype(np.int32)
    import scipy.sparse as sp

    postings = sp.csc_matrix((counts, (rows, terms)), shape=(n_docs, n_terms))
    postings.sort_indices()
    return (postings.indptr.astype(np.int64), postings.indices.astype(np.int32, copy=False),
            postings.data.astype(np.int32, copy=False))


class TermIndex:
    """The vocabulary and one :class:`FieldIndex` per indexed field."""

    def __init__(self, vocab: Vocabulary, fields: dict):
        self.vocab = vocab
        self.fields = fields
        self._known = None

    @property
    def n_docs(self) -> int:
        return next(iter(self.fields.values())).n_docs

    def known_ids(self, terms) -> np.ndarray:
        """Term id of each of ``terms``, -1 for a term no live question holds in any field
        (absent, or left only by deleted questions: a fresh build would not have it)."""
        return np.array(self.known_id_list(terms), dtype=np.int64)

    def known_id_list(self, terms) -> list:
        """:meth:`known_ids` as a list of ints (what a query's analysis reads, without
        an array per query)."""
        live = self._known
        if live is None:  # one byte per term id: 1 when a live question holds it
            live = self._known = np.logical_or.reduce(
                [np.asarray(f.stats.df) > 0 for f in self.fields.values()]).tobytes()
        get = self.vocab.id_map.get
        return [i if i >= 0 and live[i] else -1 for i in (get(t, -1) for t in terms)]

    def __getitem__(self, field) -> FieldIndex:
        return self.fields[field]

    def __contains__(self, field) -> bool:
        return field in self.fields


class TermIndexBuilder:
    """Accumulates analysed questions into a :class:`TermIndex`.

    Questions are analysed a batch at a time (:mod:`~cqa_search.index.batches`): the
    texts of a whole batch are tokenized at once, each distinct token is analysed once
    and every token costs one dictionary look-up (or less, compiled); the batch comes back
    as (row, term, count) triplets and term sequences, made with numpy. With ``n_jobs``,
    analysis threads take the batches while the caller reads and stores the next
    questions; the index is the same bit for bit.

    Parameters
    ----------
    analyzer : Analyzer
    fields : sequence of str
        Names from :data:`FIELDS`.
    batch_size : int
        Questions per batch.
    vocab : Vocabulary, optional
        A vocabulary to extend (terms it has keep their ids; new terms come after): the
        parts of one archive (segments, shards) then share term ids. A new one by default.
    n_jobs : int or None, default None
        Threads at work, this one included (-1: one per core): the others analyse the
        batches once two have been analysed here (a small archive never starts them),
        with the compiled kernels (:class:`~cqa_search.index.batches.BatchAnalysis`);
        1 or None: this thread alone.
    """

    def __init__(self, analyzer, fields=("question", "answers"), batch_size=4096, vocab=None,
                 n_jobs=None):
        unknown = [f for f in fields if f not in FIELDS]
        if unknown:
            raise ParameterError(f"fields must be among {{{', '.join(map(repr, FIELDS))}}}; "
                                 f"got {unknown[0]!r}")
        self.analyzer = analyzer
        self.field_names = tuple(fields)
        self.vocab = Vocabulary() if vocab is None else vocab
        self.n_docs = 0
        self._batch_size = batch_size
        self._analysis = BatchAnalysis(analyzer, len(fields), n_jobs)
        self._texts = []                  # the texts of the batch being filled
        self._batch_rows = deque()        # first row of each batch in flight
        self._token_ids = {}              # surface token -> term id (-1: a stopword)
        self._local_ids = {}              # a thread's LocalTerms -> its local term ids' ids
        self._chunks = {f: [] for f in fields}                         # (rows, terms, counts)
        self._doc_len = {f: [] for f in fields}
        self._sequences = {f: [] for f in fields}
        self._batch_start = 0

    def add(self, question: Question) -> None:
        """Buffer one question (its row is the number added before it); a full batch is
        analysed."""
        self._texts.extend([FIELDS[name](question) for name in self.field_names])
        self.n_docs += 1
        if self.n_docs - self._batch_start >= self._batch_size:
            self._flush()

    def _flush(self):
        if self.n_docs > self._batch_start:
            self._batch_rows.append(self._batch_start)
            texts, self._texts = self._texts, []
            self._batch_start = self.n_docs
            for key, batch in self._analysis.submit(texts):
                self._merge(key, batch)

    def _merge(self, key, batch):
        """One analysed batch (the oldest in flight), its local term ids mapped to the
        index's: the new terms and tokens in the order they occur (see
        :mod:`~cqa_search.index.batches`)."""
        row0 = self._batch_rows.popleft()
        ids = self._local_ids.setdefault(key, array("q"))
        ids.extend(self.vocab.add_many(batch.new_terms))
        token_ids = self._token_ids
        for word, local in batch.new_tokens:
            if word not in token_ids:
                token_ids[word] = ids[local] if local >= 0 else -1
        to_global = np.frombuffer(ids, dtype=np.int64) if len(ids) else np.zeros(0, np.int64)
        for name, (sequence, doc_len, rows, terms, counts) in zip(self.field_names,
                                                                  batch.fields):
            self._sequences[name].append(to_global[sequence].astype(np.int32))
            self._doc_len[name].append(doc_len)
            self._chunks[name].append(((rows + row0).astype(np.int32),
                                       to_global[terms].astype(np.int32), counts))

    def surface_words(self) -> dict:
        """Every surface word met that is not a stopword -> its term id: the candidates of
        "did you mean"."""
        return {tok: tid for tok, tid in self._token_ids.items() if tid >= 0}

    def build(self) -> TermIndex:
        """The finished index (the builder should not be used afterwards)."""
        self._flush()
        threads = self._analysis.n_threads
        for key, batch in self._analysis.finish():
            self._merge(key, batch)
        names = self.field_names
        if threads and len(names) > 1:  # the fields' postings ordered side by side
            with ThreadPoolExecutor(min(len(names), threads + 1)) as pool:
                return TermIndex(self.vocab, dict(zip(names, pool.map(self._field, names))))
        return TermIndex(self.vocab, {name: self._field(name) for name in names})

    def _field(self, name) -> FieldIndex:
        """The postings of one field from its batches' triplets (they are dropped)."""
        chunks = self._chunks.pop(name)
        if chunks:
            rows, terms, counts = (np.concatenate(c) for c in zip(*chunks))
        else:
            rows = terms = counts = np.zeros(0, np.int32)
        del chunks
        indptr, indices, data = _by_term(rows, terms, counts, self.n_docs, len(self.vocab))
        del rows, terms, counts
        doc_len = np.concatenate(self._doc_len.pop(name) or [np.zeros(0, np.int32)])
        sequence = np.concatenate(self._sequences.pop(name) or [np.zeros(0, np.int32)])
        return FieldIndex(name, indptr, indices, data, doc_len, sequence)
