"""Views of the archive for SMT + MF: the questions in other "languages", all offline.

Zhou et al. (2013) enrich every question with its machine translations into P - 1 other
languages; each language is a *view*, a bag of words over its own vocabulary, and the
views are factorized jointly (:mod:`cqa_search.factorization.multiview`). Google
Translate is not reachable here, so the views come from what a user can have offline:

* :class:`DictionaryTranslator` -- a bilingual dictionary in dictd format (read by
  :class:`~cqa_search.factorization.dictd.DictdDictionary`; Debian ships FreeDict's
  ``dict-freedict-eng-fra``, ``-deu``, ``-ita``, ``-spa`` under ``/usr/share/dictd``),
  word by word, keeping the first translations of each word (the paper's "Dict"
  variant, Table 6);
* :class:`IBM1Translator` -- our own IBM Model 1 table as a monolingual "pseudo
  language": each index term replaced by its most probable translations;
* :class:`ArchiveTranslator` -- translations supplied with the archive, e.g. a JSONL key
  ``"translations": {"fr": "...", "de": "..."}`` (kept in ``Question.extra``);
* :class:`DummyTranslator` -- the paper's dummy translator (DT): a copy of view 1, the
  ablation that adds no information.

A translator maps one of three *sources* of a question to a bag of target words:

``"terms"``
    the question's index terms (the index's own analysis: tokenizer, stopwords,
    stemmer); the IBM1 and dummy views, and view 1 itself.
``"tokens"``
    the question's surface tokens (lowercased words of the index's tokenizer, index
    stopwords dropped): dictionary headwords are words, not stems. A token that is not a
    headword is looked up by its stem among the headwords with the same stem (the
    index's stemmer), so "houses" finds "house".
``"texts"``
    a whole text per question (archive-supplied translations).

Foreign text (dictionary translations, supplied translations) is analysed by a simple
lowercase tokenizer (the index's token pattern, NFKC, lowercase) *without* the index's
English stopwords or stemmer: those would mangle French or German words, and tf-idf
already gives foreign function words a low weight.

:func:`build_view` turns a translator into the view's tf-idf matrix (scikit-learn's
``TfidfTransformer``, questions as rows) and a :class:`ViewEncoder`, the stored part that
encodes queries the same way (translation table + idf), so a stored model needs neither
the dictionary files nor the translation model at search time.
"""
from __future__ import annotations

import logging
import os
from abc import ABC
from array import array

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfTransformer

from .._utils import progress_bar
from ..analysis import Analyzer
from ..exceptions import ParameterError
from ..index.validate import INT32_MAX, InvalidArray, check_array, check_sparse
from .dictd import DEFAULT_DICT_DIR, DictdDictionary

__all__ = ["Translator", "DictionaryTranslator", "IBM1Translator", "ArchiveTranslator",
           "DummyTranslator", "ViewEncoder", "SourceBags", "build_view", "make_translator",
           "parse_views", "find_translation_table", "top_per_row"]

logger = logging.getLogger(__name__)

SOURCES = ("terms", "tokens", "texts")


# ---------------------------------------------------------------------------------------
# Translators
# ---------------------------------------------------------------------------------------
class Translator(ABC):
    """How one view of the archive is made.

    Subclasses set ``name`` (the view's name; its feature is ``mv_<name>``) and
    ``source`` (one of ``"terms"``, ``"tokens"``, ``"texts"``; see the module
    docstring), and implement the method of their source:

    - ``terms``: :meth:`term_table`, a table from index terms to target words;
    - ``tokens``: :meth:`token_table`, a table from surface tokens to target words;
    - ``texts``: :meth:`texts`, one target-language text per question.

    A table is a sparse matrix ``(n_sources, n_targets)`` of non-negative weights (how
    much of a source word goes to each target word) with the list of target words
    (None when the targets are the index's terms).
    """

    name: str = ""
    source: str = "terms"

    def term_table(self, view):
        """``(table, vocabulary)`` over the index's terms (source ``"terms"``)."""
        raise NotImplementedError

    def token_table(self, tokens, analyzer):
        """``(table, vocabulary)`` for the given surface tokens (source ``"tokens"``)."""
        raise NotImplementedError

    def texts(self, view) -> list:
        """One text per archived question, in row order (source ``"texts"``)."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}(name={self.name!r})"


def _foreign_analyzer(analyzer) -> Analyzer:
    """Lowercase tokenizer with the index's token pattern; no stopwords, no stemming."""
    pattern = getattr(analyzer, "token_pattern", None)
    return Analyzer(stopwords=None, stem=None) if pattern is None else \
        Analyzer(token_pattern=pattern, stopwords=None, stem=None)


class DictionaryTranslator(Translator):
    """Word-by-word translation with a bilingual dictionary (dictd format).

    Each surface token of a question (index stopwords dropped) is looked up (exactly,
    or by stem, see :meth:`DictdDictionary.resolve`); its first ``n_translations``
    translations, in dictionary order, share the token's weight equally, and the words
    of a multi-word translation each get that share. Tokens without an entry
    contribute nothing to this view.

    Parameters
    ----------
    dictionary : DictdDictionary or path
        The dictionary, or the path of its ``.index`` file.
    n_translations : int, default 3
        Translations kept per word (dictionaries list the usual sense first).
    name : str, optional
        View name (default: the last ``-`` part of the file name, ``fra`` for
        ``freedict-eng-fra``). :meth:`from_dir` finds a dictionary by language code.
    """

    source = "tokens"

    def __init__(self, dictionary, *, n_translations=3, name=None):
        if not isinstance(dictionary, DictdDictionary):
            dictionary = DictdDictionary(dictionary)
        if isinstance(n_translations, bool) or not isinstance(n_translations, int) \
                or n_translations < 1:
            raise ParameterError(f"n_translations must be a positive integer; got "
                                 f"{n_translations!r}")
        self.dictionary = dictionary
        self.n_translations = n_translations
        self.name = name or dictionary.name.rsplit("-", 1)[-1]

    @classmethod
    def from_dir(cls, lang, dict_dir=DEFAULT_DICT_DIR, **kwargs) -> "DictionaryTranslator":
        """The English-``lang`` dictionary of ``dict_dir`` (``freedict-eng-<lang>.index``).

        Raises
        ------
        ParameterError
            No such directory or dictionary; the message names the Debian package.
        """
        package = f"dict-freedict-eng-{lang}"
        hint = (f"install it with `apt-get install {package}` (FreeDict English-{lang}) "
                "or give the directory that holds it (--dict-dir)")
        dict_dir = os.fspath(dict_dir)
        if not os.path.isdir(dict_dir):
            raise ParameterError(f"dictionary directory {dict_dir} does not exist: {hint}")
        names = [f"freedict-eng-{lang}.index", f"eng-{lang}.index", f"{lang}.index"]
        for name in names:
            path = os.path.join(dict_dir, name)
            if os.path.isfile(path):
                kwargs.setdefault("name", lang)
                return cls(DictdDictionary(path), **kwargs)
        have = sorted(n[:-len(".index")] for n in os.listdir(dict_dir) if n.endswith(".index"))
        raise ParameterError(
            f"no dictd dictionary for {lang!r} in {dict_dir} (looked for "
            f"{', '.join(names)}; found: {', '.join(have) or 'none'}): {hint}")

    def translate(self, token, stem=None) -> list:
        """The kept translations of one token (empty when the dictionary lacks it)."""
        headword = self.dictionary.resolve(token, stem)
        if headword is None:
            return []
        return self.dictionary.translations(headword, self.n_translations)

    def token_table(self, tokens, analyzer):
        foreign = _foreign_analyzer(analyzer)
        stem = getattr(analyzer, "stem_word", None) if getattr(analyzer, "stem", None) else None
        vocab, rows, cols, vals = {}, array("q"), array("q"), array("d")
        for i, token in enumerate(tokens):
            translations = self.translate(token, stem)
            share = 1.0 / len(translations) if translations else 0.0
            for t in translations:
                for word in foreign.analyze(t):
                    rows.append(i)
                    cols.append(vocab.setdefault(word, len(vocab)))
                    vals.append(share)
        table = sp.csr_matrix((np.frombuffer(vals, np.float64),
                               (np.frombuffer(rows, np.int64), np.frombuffer(cols, np.int64))),
                              shape=(len(tokens), len(vocab)))
        table.sum_duplicates()
        return table, list(vocab)


class IBM1Translator(Translator):
    """An IBM Model 1 table as a monolingual "pseudo language".

    Each index term ``s`` of a question is replaced by its ``n_translations`` most
    probable translations ``t`` (``p(t | s)``, renormalised to sum to 1 over the kept
    ones, so a word keeps its weight), over the same vocabulary.

    Parameters
    ----------
    translation_probs : sparse matrix or ndarray, shape (n_terms + 1, n_terms)
        ``translation_probs[1 + s, t] = p(t | s)`` over the index's term ids; row 0 is the
        NULL source and is not used (as ``IBMModel1.translation_probs_``).
    n_translations : int, default 3
    min_prob : float, default 0.0
        Translations less probable than this are dropped first.
    name : str, default "ibm1"
    """

    source = "terms"

    def __init__(self, translation_probs, *, n_translations=3, min_prob=0.0, name="ibm1"):
        if isinstance(n_translations, bool) or not isinstance(n_translations, int) \
                or n_translations < 1:
            raise ParameterError(f"n_translations must be a positive integer; got "
                                 f"{n_translations!r}")
        if not 0.0 <= min_prob < 1.0:
            raise ParameterError(f"min_prob must be in [0, 1); got {min_prob!r}")
        self.translation_probs = translation_probs
        self.n_translations = n_translations
        self.min_prob = min_prob
        self.name = name

    def term_table(self, view):
        probs = sp.csr_matrix(self.translation_probs, dtype=np.float64)
        n_terms = len(view.index.vocab)
        if probs.shape != (n_terms + 1, n_terms):
            raise ValueError(f"translation_probs must have shape (n_terms + 1, n_terms) = "
                             f"({n_terms + 1}, {n_terms}) for this index; got {probs.shape}")
        return top_per_row(probs[1:], self.n_translations, self.min_prob), None


def top_per_row(matrix, n, min_value=0.0) -> sp.csr_matrix:
    """The ``n`` largest entries of each row (above ``min_value``), rows renormalised to 1."""
    m = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
    m.sum_duplicates()
    m.data[m.data <= min_value] = 0.0
    m.eliminate_zeros()
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    order = np.lexsort((-m.data, rows))  # by row, largest first
    rank = np.arange(m.nnz) - m.indptr[rows[order]]
    keep = np.sort(order[rank < n])
    top = sp.csr_matrix((m.data[keep], (rows[keep], m.indices[keep])), shape=m.shape)
    sums = np.asarray(top.sum(axis=1)).ravel()
    sums[sums == 0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / sums) @ top)


class ArchiveTranslator(Translator):
    """Translations supplied with the archive (``question.extra[key][lang]``).

    The JSONL record of a question may carry e.g. ``"translations": {"fr": "Comment
    renouveler mon visa ?"}``; a value may also be a mapping of fields (``{"title":
    ..., "body": ...}``), whose texts are joined. Questions without a translation
    contribute an empty bag (and are counted in a log message).

    Queries come without translations: their bag in this view is empty, so their
    coordinates in it follow from the original language alone (eq. 19 with
    ``q_p = 0``).

    Parameters
    ----------
    lang : str
        The key of the language (``fr``).
    key : str, default "translations"
    name : str, optional
        View name (default ``lang``).
    """

    source = "texts"

    def __init__(self, lang, *, key="translations", name=None):
        if not isinstance(lang, str) or not lang:
            raise ParameterError(f"lang must be a non-empty string; got {lang!r}")
        self.lang = lang
        self.key = key
        self.name = name or lang

    def texts(self, view) -> list:
        out, missing = [], 0
        for q in view.archive:
            value = (q.extra.get(self.key) or {})
            value = value.get(self.lang) if hasattr(value, "get") else None
            if hasattr(value, "values"):
                value = "\n".join(str(v) for v in value.values() if v)
            if not value:
                missing += 1
                value = ""
            out.append(str(value))
        if missing == len(out):
            raise ParameterError(f"no archived question has a translation {self.lang!r} "
                             f"(looked for question.extra[{self.key!r}][{self.lang!r}], the "
                             f"JSONL key \"{self.key}\": {{\"{self.lang}\": \"...\"}})")
        if missing:
            logger.info("view %s: %d of %d questions have no translation", self.name, missing,
                        len(out))
        return out


class DummyTranslator(Translator):
    """The dummy translator (DT): every term translates to itself, a copy of view 1."""

    source = "terms"

    def __init__(self, *, name="dummy"):
        self.name = name

    def term_table(self, view):
        return sp.identity(len(view.index.vocab), format="csr", dtype=np.float64), None


def parse_views(views) -> list:
    """View specifications as a list: ``"dict:fra,ibm1"`` -> ``["dict:fra", "ibm1"]``."""
    if isinstance(views, str):
        views = [v.strip() for v in views.split(",")]
    return [v for v in views if not isinstance(v, str) or v]


def make_translator(spec, *, dict_dir=DEFAULT_DICT_DIR, n_translations=3,
                    translation_probs=None) -> Translator:
    """A translator from a specification.

    ``dict:LANG`` (a dictd dictionary ``freedict-eng-LANG`` of ``dict_dir``), ``ibm1``
    (needs ``translation_probs``), ``archive:LANG`` (``question.extra["translations"]
    [LANG]``) or ``dummy``; a :class:`Translator` is returned as it is.

    Raises
    ------
    ValueError
        Unknown specification, or ``ibm1`` without a table.
    FileNotFoundError
        Missing dictionary directory or dictionary (naming the package to install).
    """
    if isinstance(spec, Translator):
        return spec
    if not isinstance(spec, str):
        raise ParameterError(f"a view must be a Translator or a string; got {spec!r}")
    kind, _, arg = spec.strip().partition(":")
    if kind == "dict" and arg:
        return DictionaryTranslator.from_dir(arg, dict_dir, n_translations=n_translations)
    if kind == "archive" and arg:
        return ArchiveTranslator(arg)
    if kind == "ibm1" and not arg:
        if translation_probs is None:
            raise ParameterError("view 'ibm1' needs an IBM Model 1 translation table: store an IBM "
                             "Model 1 model in the index first (`cqa-search fit INDEX "
                             "translation`), or pass one; without it, views='' (--views '') "
                             "keeps the original view only")
        return IBM1Translator(translation_probs, n_translations=n_translations)
    if kind == "dummy" and not arg:
        return DummyTranslator()
    raise ParameterError(f"unknown view {spec!r}: use dict:LANG, ibm1, archive:LANG or dummy")


def find_translation_table(models, name=None, n_terms=None, *, found=None):
    """The IBM Model 1 table (``translation_probs_``) of a stored model.

    Parameters
    ----------
    models : mapping of str -> model
        E.g. ``SearchEngine.models``.
    name : str, optional
        The model to use; by default the only model with a ``translation_probs_``.
    n_terms : int, optional
        The index's vocabulary size: a table fitted before ``cqa-search add`` grew the
        vocabulary is extended to it (a new term translates to itself, as
        :meth:`IBMModel1.extended <cqa_search.translation.IBMModel1.extended>` says).
    found : list, optional
        Gets the name of the model whose table is returned appended.

    Returns
    -------
    sparse matrix or None
        None when no model has a table (and no ``name`` was asked for).

    Raises
    ------
    ValueError
        ``name`` is not a model with a table, or several models have one and no name was
        given.
    """
    tables = {n: m for n, m in models.items() if getattr(m, "translation_probs_", None) is not None}
    if name is not None:
        if name not in tables:
            raise ParameterError(f"model {name!r} has no IBM Model 1 table (translation_probs_); "
                                 f"models with one: {', '.join(tables) or 'none'}")
    elif len(tables) > 1:
        raise ParameterError(f"several models have a translation table ({', '.join(tables)}): "
                             "choose one by name")
    elif not tables:
        return None
    else:
        name = next(iter(tables))
    model = tables[name]
    if found is not None:
        found.append(name)
    ibm1 = getattr(model, "ibm1_", model)  # a TranslationModel's word table
    if n_terms is not None and hasattr(ibm1, "extended"):
        return ibm1.extended(n_terms).translation_probs_
    return model.translation_probs_


# ---------------------------------------------------------------------------------------
# From translators to tf-idf views
# ---------------------------------------------------------------------------------------
class ViewEncoder:
    """The stored part of a view: how a question or a query becomes its tf-idf vector.

    counts = source bag @ ``table`` (for ``texts`` views, the tokens of the text), then
    ``tf * idf`` and L2 normalisation, exactly as scikit-learn's ``TfidfTransformer``
    (smooth idf) did for the archive.

    Parameters
    ----------
    name : str
    source : {"terms", "tokens", "texts"}
    idf : ndarray of shape (n_features,)
    table : sparse matrix of shape (n_sources, n_features), optional
        None for ``texts`` views.
    tokens : list of str, optional
        The source tokens (rows of ``table``) of a ``tokens`` view.
    vocabulary : list of str, optional
        The target words (columns) of ``tokens`` and ``texts`` views.
    terms : ndarray of int, optional
        The index terms (columns) of a ``terms`` view whose targets are index terms.
    """

    def __init__(self, name, source, idf, table=None, *, tokens=None, vocabulary=None,
                 terms=None):
        if source not in SOURCES:
            raise ValueError(f"source must be one of {{{', '.join(map(repr, SOURCES))}}}; "
                             f"got {source!r}")
        self.name = name
        self.source = source
        self.idf = np.asarray(idf, dtype=np.float64)
        self.table = None if table is None else sp.csr_matrix(table)
        self.tokens = None if tokens is None else list(tokens)
        self.vocabulary = None if vocabulary is None else list(vocabulary)
        self.terms = None if terms is None else np.asarray(terms)
        self._token_rows = None
        if self.table is not None and self.table.shape[1] != len(self.idf):
            raise ValueError(f"view {name!r}: table has {self.table.shape[1]} columns but idf "
                             f"{len(self.idf)} entries")

    @property
    def n_features(self) -> int:
        return len(self.idf)

    def query_counts(self, query, analyzer, n_terms):
        """The bag of a query (a :class:`AnalyzedQuery`) in this view: (feature ids, counts).

        Numpy on the table's arrays: a query's few rows do not repay scipy's sparse
        product set-up (about ten times the arithmetic here).
        """
        if self.source == "texts":
            return np.zeros(0, np.int64), np.zeros(0)
        if self.source == "terms":
            # terms the index gained after the fit (ids beyond the table) have no translation
            n = self.table.shape[0]
            ids = np.asarray(query.term_ids, dtype=np.int64)
            keep = ids < n
            ids, weights = ids[keep], np.asarray(query.qtf, dtype=np.float64)[keep]
        else:
            if self._token_rows is None:
                self._token_rows = {t: i for i, t in enumerate(self.tokens)}
            rows = [self._token_rows.get(t) for t in analyzer.tokenize(query.text)
                    if not analyzer.is_stopword(t)]
            ids, counts = np.unique(np.array([r for r in rows if r is not None],
                                             dtype=np.int64), return_counts=True)
            weights = counts.astype(np.float64)
        table = self.table
        starts = table.indptr[ids].astype(np.int64)
        lengths = table.indptr[ids + 1] - starts
        ends = np.cumsum(lengths)
        at = np.repeat(starts - ends + lengths, lengths) + np.arange(ends[-1] if len(ends) else 0)
        cols, inverse = np.unique(table.indices[at], return_inverse=True)
        # the products summed per column in row order, as a sparse product does
        sums = np.bincount(inverse, weights=np.repeat(weights, lengths) * table.data[at],
                           minlength=len(cols))
        keep = sums != 0
        return cols[keep].astype(np.int64), sums[keep]

    def encode_query(self, query, analyzer, n_terms) -> sp.csr_matrix:
        """The query's L2-normalised tf-idf row ``(1, n_features)`` (all zeros when it has
        no words here)."""
        cols, counts = self.query_counts(query, analyzer, n_terms)
        data = counts * self.idf[cols]
        keep = data != 0
        cols, data = cols[keep], data[keep]
        norm = np.sqrt(np.sum(data * data))
        if norm > 0:
            data = data * (1.0 / norm)
        return sp.csr_matrix((data, cols, np.array([0, len(cols)])), shape=(1, self.n_features))

    # -- storage ---------------------------------------------------------------------
    def state(self, prefix):
        """``(meta, arrays)``: JSON metadata and arrays named ``prefix + ...``."""
        meta = {"name": self.name, "source": self.source}
        if self.tokens is not None:
            meta["tokens"] = self.tokens
        if self.vocabulary is not None:
            meta["vocabulary"] = self.vocabulary
        arrays = {f"{prefix}idf": self.idf}
        if self.table is not None:
            t = self.table
            arrays.update({f"{prefix}table_indptr": t.indptr.astype(np.int64),
                           f"{prefix}table_indices": t.indices.astype(np.int32),
                           f"{prefix}table_data": t.data.astype(np.float64)})
            meta["table_shape"] = list(t.shape)
        if self.terms is not None:
            arrays[f"{prefix}terms"] = self.terms.astype(np.int32)
        return meta, arrays

    @classmethod
    def from_state(cls, meta, arrays, prefix) -> "ViewEncoder":
        table = None
        idf = check_array(arrays[f"{prefix}idf"], f"view {meta.get('name')!r} idf", kind="f",
                          finite=True)
        if f"{prefix}terms" in arrays:
            check_array(arrays[f"{prefix}terms"], f"view {meta.get('name')!r} terms",
                        kind="iu", shape=idf.shape, low=0)
        if "table_shape" in meta:
            shape = meta["table_shape"]
            if not (isinstance(shape, list) and len(shape) == 2
                    and all(type(x) is int and 0 <= x <= INT32_MAX for x in shape)):
                raise InvalidArray(f"view {meta.get('name')!r}: bad table shape")
            check_sparse(arrays[f"{prefix}table_indptr"], arrays[f"{prefix}table_indices"],
                         arrays[f"{prefix}table_data"], tuple(shape),
                         f"view {meta.get('name')!r} table")
            table = sp.csr_matrix((arrays[f"{prefix}table_data"], arrays[f"{prefix}table_indices"],
                                   arrays[f"{prefix}table_indptr"]), shape=tuple(meta["table_shape"]))
        return cls(meta["name"], meta["source"], arrays[f"{prefix}idf"], table,
                   tokens=meta.get("tokens"), vocabulary=meta.get("vocabulary"),
                   terms=arrays.get(f"{prefix}terms"))


class SourceBags:
    """The source bags of the archive, computed once and shared by the views.

    ``terms()``: the question field's term counts ``(n_docs, n_terms)``; ``tokens()``:
    the surface-token counts (index stopwords dropped) with their token list.
    """

    def __init__(self, view, *, progress=False):
        self.view = view
        self.progress = progress
        self._tokens = None

    def terms(self) -> sp.csr_matrix:
        return sp.csr_matrix(self.view.index["question"].rows_matrix(), dtype=np.float64)

    def tokens(self):
        if self._tokens is None:
            analyzer, archive = self.view.analyzer, self.view.archive
            ids, token_id = array("q"), {}
            lengths = array("q")
            bar = progress_bar(self.progress, "tokenizing", "questions", len(archive))
            for q in archive:
                toks = [t for t in analyzer.tokenize(q.text) if not analyzer.is_stopword(t)]
                ids.extend(token_id.setdefault(t, len(token_id)) for t in toks)
                lengths.append(len(toks))
                bar.update()
            bar.close()
            rows = np.repeat(np.arange(len(lengths)), np.frombuffer(lengths, np.int64))
            counts = sp.csr_matrix((np.ones(len(rows)), (rows, np.frombuffer(ids, np.int64))),
                                   shape=(len(lengths), len(token_id)))
            counts.sum_duplicates()
            self._tokens = (list(token_id), counts)
        return self._tokens


def build_view(translator, view, *, min_df=1, bags=None):
    """The tf-idf matrix of one view of the archive, and its encoder.

    Parameters
    ----------
    translator : Translator
    view : IndexView
    min_df : int, default 1
        Target words in fewer questions are dropped (a word of a single question relates
        no two questions).
    bags : SourceBags, optional
        Shared source bags (to tokenize the archive once for several views).

    Returns
    -------
    X : csr_matrix of shape (n_docs, n_features)
        L2-normalised tf-idf rows (``TfidfTransformer``, smooth idf).
    encoder : ViewEncoder
    """
    bags = SourceBags(view) if bags is None else bags
    tokens = vocabulary = terms = None
    if translator.source == "terms":
        table, vocabulary = translator.term_table(view)
        table = sp.csr_matrix(table, dtype=np.float64)
        counts = bags.terms() @ table
        if vocabulary is None and table.shape[1] == len(view.index.vocab):
            terms = np.arange(table.shape[1])
    elif translator.source == "tokens":
        tokens, token_counts = bags.tokens()
        table, vocabulary = translator.token_table(tokens, view.analyzer)
        table = sp.csr_matrix(table, dtype=np.float64)
        used = np.flatnonzero(np.diff(table.indptr))  # tokens that have a translation
        tokens = [tokens[i] for i in used]
        table = table[used]
        counts = token_counts[:, used] @ table
    elif translator.source == "texts":
        texts = translator.texts(view)
        if len(texts) != view.n_docs:
            raise ValueError(f"view {translator.name!r}: {len(texts)} texts for "
                             f"{view.n_docs} questions")
        foreign = _foreign_analyzer(view.analyzer)
        word_id, ids, lengths = {}, array("q"), array("q")
        for text in texts:
            words = foreign.analyze(text)
            ids.extend(word_id.setdefault(w, len(word_id)) for w in words)
            lengths.append(len(words))
        rows = np.repeat(np.arange(len(texts)), np.frombuffer(lengths, np.int64))
        counts = sp.csr_matrix((np.ones(len(rows)), (rows, np.frombuffer(ids, np.int64))),
                               shape=(len(texts), len(word_id)))
        vocabulary, table = list(word_id), None
    else:
        raise ValueError(f"translator {translator!r} has source {translator.source!r}; "
                         f"expected one of {SOURCES}")
    counts = sp.csr_matrix(counts, dtype=np.float64)
    counts.sum_duplicates()
    counts.eliminate_zeros()
    df = np.bincount(counts.indices, minlength=counts.shape[1])
    keep = np.flatnonzero(df >= max(min_df, 1))
    counts = counts[:, keep]
    if table is not None:
        table = sp.csr_matrix(table[:, keep])
    if vocabulary is not None:
        vocabulary = [vocabulary[i] for i in keep]
    if terms is not None:
        terms = terms[keep]
    if counts.shape[1] == 0:
        raise ParameterError(f"view {translator.name!r} is empty: no word of it occurs in "
                         f"{max(min_df, 1)} or more questions")
    tfidf = TfidfTransformer()
    X = sp.csr_matrix(tfidf.fit_transform(counts), dtype=np.float64)
    encoder = ViewEncoder(translator.name, translator.source, tfidf.idf_, table,
                          tokens=tokens, vocabulary=vocabulary, terms=terms)
    return X, encoder
