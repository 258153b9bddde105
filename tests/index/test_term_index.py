"""The batch builder against a naive count of every (document, term)."""
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search.analysis import Analyzer
from cqa_search.archive import Question
from cqa_search.index.term_index import FIELDS, FieldIndex, TermIndexBuilder


def test_builder_counts_equal_naive_counts(toy_archive):
    analyzer = Analyzer()
    builder = TermIndexBuilder(Analyzer(), fields=("question", "answers", "best_answer"),
                               batch_size=5)  # several batches
    for q in toy_archive:
        builder.add(q)
    index = builder.build()
    for name, fi in index.fields.items():
        dense = fi.matrix().toarray()
        for row, q in enumerate(toy_archive):
            expected = Counter(analyzer.analyze(FIELDS[name](q)))
            got = {index.vocab.term(t): int(c) for t, c in enumerate(dense[row]) if c}
            assert got == dict(expected)
            assert fi.doc_len[row] == sum(expected.values())
        assert fi.total_terms == dense.sum()
        np.testing.assert_array_equal(fi.stats.term_freq, dense.sum(axis=0))
        np.testing.assert_array_equal(fi.df, (dense > 0).sum(axis=0))
        np.testing.assert_allclose(fi.stats.collection_prob.sum(), 1.0)
        for t in range(fi.n_terms):  # postings sorted by row
            rows, _ = fi.postings_of(t)
            assert np.all(np.diff(rows) > 0)


def test_empty_answers_field_has_zero_length(toy_archive):
    builder = TermIndexBuilder(Analyzer())
    for q in toy_archive:
        builder.add(q)
    fi = builder.build()["answers"]
    assert fi.doc_len[toy_archive.row("t10")] == 0


def test_sequences_keep_text_order_without_stopwords(toy_archive):
    analyzer = Analyzer()
    builder = TermIndexBuilder(analyzer, batch_size=3)
    for q in toy_archive:
        builder.add(q)
    index = builder.build()
    for name, fi in index.fields.items():
        for row, q in enumerate(toy_archive):
            assert [index.vocab.term(t) for t in fi.terms_of(row)] == \
                analyzer.analyze(FIELDS[name](q))
        np.testing.assert_array_equal(fi.rows_matrix().toarray(), fi.matrix().toarray())


def test_term_ids_do_not_depend_on_string_hashing(tmp_path, fixtures):
    """Two builds in processes with different hash seeds give identical indexes."""
    import subprocess
    import sys

    from cqa_search.index.store import open_index

    code = ("import sys; from cqa_search import build_index; "
            "build_index(sys.argv[1], sys.argv[2])")
    digests = []
    for seed in ("1", "2"):
        out = tmp_path / f"idx{seed}"
        subprocess.run([sys.executable, "-c", code, str(fixtures / "toy_archive.jsonl"), str(out)],
                       check=True, env={"PYTHONHASHSEED": seed, "PATH": ""})
        manifest = open_index(out).manifest
        digests.append({k: v["sha256"] for k, v in manifest["files"].items()})
    assert digests[0] == digests[1]


def test_parts_scored_with_the_whole_collections_statistics_score_as_one_index():
    """An archive split in two parts over one vocabulary: each part, given the statistics
    of both, gives every term model the scores of the one index of the whole archive."""
    from cqa_search.retrieval import BM25, VSM, LMDirichlet, LMJelinekMercer

    docs = ["renew visa office", "visa fees", "cheap sofa shop", "sofa delivery fees",
            "visa on arrival", "renew a car licence"]
    analyzer = Analyzer()
    whole = TermIndexBuilder(analyzer, ("question",))
    for i, d in enumerate(docs):
        whole.add(Question(f"d{i}", d))
    whole = whole.build()
    parts = []
    for rows in (range(0, 4), range(4, 6)):
        m = whole["question"].matrix().tocsr()[list(rows)].tocsc()
        m.sort_indices()
        seq = np.concatenate([whole["question"].terms_of(r) for r in rows])
        parts.append(FieldIndex("question", m.indptr.astype(np.int64), m.indices.astype(np.int32),
                                m.data.astype(np.int32), whole["question"].doc_len[list(rows)],
                                seq.astype(np.int32)))
    stats = parts[0].stats + parts[1].stats
    np.testing.assert_array_equal(stats.df, whole["question"].stats.df)
    ids = np.array(sorted({whole.vocab.id("visa"), whole.vocab.id("renew"),
                           whole.vocab.id("fees")}))
    qtf = np.ones(len(ids))
    for model in (BM25(), BM25(method="robertson"), LMJelinekMercer(), LMDirichlet(mu=10),
                  VSM()):
        full, _ = model.score_all(whole["question"], ids, qtf)
        split = np.concatenate([model.score_all(p.with_stats(stats), ids, qtf)[0]
                                for p in parts])
        np.testing.assert_allclose(split, full, rtol=1e-6, err_msg=model.name)
        alone = np.concatenate([model.score_all(p, ids, qtf)[0] for p in parts])
        assert not np.allclose(alone, full)  # the parts' own statistics would differ


def test_a_builder_extending_a_vocabulary_keeps_its_ids():
    from cqa_search.index.vocab import Vocabulary

    first = TermIndexBuilder(Analyzer(), ("question",))
    first.add(Question("a", "renew visa office"))
    first = first.build()
    vocab = Vocabulary(first.vocab.terms)
    second = TermIndexBuilder(Analyzer(), ("question",), vocab=vocab)
    second.add(Question("b", "visa fees at the office"))
    second = second.build()
    assert second.vocab.terms[:3] == first.vocab.terms == ["renew", "visa", "offic"]
    assert second.vocab.terms[3:] == ["fee"]
    assert second["question"].n_terms == 4 and second["question"].terms_of(0).tolist() == [1, 3, 2]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n_parts=st.integers(1, 5), n_terms=st.integers(1, 12))
def test_concat_equals_the_stacked_count_matrix(seed, n_parts, n_terms):
    """Segments merged at open: the postings of each term are those of every part in turn,
    rows shifted; checked against scipy's stacking of the parts' count matrices."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    parts, dense = [], []
    for _ in range(n_parts):
        n_docs, known = int(rng.integers(0, 9)), int(rng.integers(0, n_terms + 1))
        m = np.where(rng.random((n_docs, known)) < 0.4, rng.integers(1, 4, (n_docs, known)), 0)
        csc = sp.csc_matrix(m)
        doc_len = m.sum(axis=1).astype(np.int32)
        parts.append(FieldIndex("question", csc.indptr.astype(np.int64),
                                csc.indices.astype(np.int32), csc.data.astype(np.int32),
                                doc_len, np.zeros(int(doc_len.sum()), np.int32)))
        dense.append(np.pad(m, ((0, 0), (0, n_terms - known))))
    merged = FieldIndex.concat(parts, n_terms)
    expected = sp.csc_matrix(np.vstack(dense).reshape(-1, n_terms))
    assert merged.indptr.tolist() == expected.indptr.tolist()
    assert merged.indices.tolist() == expected.indices.tolist()
    assert merged.counts.tolist() == expected.data.tolist()
    assert merged.doc_len.tolist() == np.vstack(dense).reshape(-1, n_terms).sum(axis=1).tolist()


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 60), st.integers(1, 40))
def test_postings_ordered_by_numpy_equal_scipys(seed, n_docs, n_terms):
    """Oracle for the build's two orderings of the postings (numpy up to
    NUMPY_ORDER_LIMIT entries, scipy's CSC conversion beyond)."""
    import cqa_search.index.term_index as ti

    rng = np.random.default_rng(seed)
    cells = rng.random((n_docs, n_terms)) < 0.3  # each (row, term) once, rows in order
    rows, terms = (a.astype(np.int32) for a in np.nonzero(cells))
    counts = rng.integers(1, 5, len(rows)).astype(np.int32)
    small = ti._by_term(rows, terms, counts, n_docs, n_terms)
    limit, ti.NUMPY_ORDER_LIMIT = ti.NUMPY_ORDER_LIMIT, -1
    try:
        large = ti._by_term(rows, terms, counts, n_docs, n_terms)
    finally:
        ti.NUMPY_ORDER_LIMIT = limit
    for a, b in zip(small, large):
        assert a.dtype == b.dtype and a.tolist() == b.tolist()


def _built(builder, questions):
    for q in questions:
        builder.add(q)
    return builder.build(), builder.surface_words()


def test_worker_processes_build_the_same_index_bit_for_bit(toy_archive):
    """Batches analysed by three threads (after one analysed here), each with local term
    ids of its own, give the serial build's vocabulary, surface words and arrays."""
    from cqa_search.index.vocab import Vocabulary

    fields = ("question", "answers", "title", "tags")
    questions = list(toy_archive) + [Question("u1", "ＦＵＬＬ width Über visas", body="\x01 odd"),
                                     Question("u2", "visa", answers=("Über", "the the"))]
    for vocab in (None, ["zebra", "visa"]):  # a vocabulary extended keeps its ids either way
        serial, serial_words = _built(TermIndexBuilder(
            Analyzer(), fields, batch_size=2, vocab=vocab and Vocabulary(vocab)), questions)
        builder = TermIndexBuilder(Analyzer(), fields, batch_size=2, n_jobs=4,
                                   vocab=vocab and Vocabulary(vocab))
        builder._analysis.serial_batches = 1
        parallel, parallel_words = _built(builder, questions)
        assert len(builder._local_ids) > 1  # (threads did analyse batches)
        assert parallel.vocab.terms == serial.vocab.terms
        assert list(parallel_words.items()) == list(serial_words.items())
        for name in fields:
            a, b = serial[name], parallel[name]
            for attr in ("indptr", "indices", "counts", "doc_len", "sequence"):
                x, y = getattr(a, attr), getattr(b, attr)
                assert x.dtype == y.dtype and x.tolist() == y.tolist(), (name, attr)


def test_n_jobs_is_checked():
    import pytest

    from cqa_search.exceptions import ParameterError

    for bad in (0, -2, 1.5, "2"):
        with pytest.raises(ParameterError, match=r"n_jobs must be a positive integer, -1 "
                                                 r"\(every core\) or None; got"):
            TermIndexBuilder(Analyzer(), n_jobs=bad)
