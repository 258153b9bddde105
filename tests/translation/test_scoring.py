"""Translation features against plain-loop references: the DP against brute-force
enumeration of segmentations, WT/TransLM against their formulas, and all eight features
against a per-candidate reference that enumerates every segmentation."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search import SearchConfig, SearchEngine, build_index
from cqa_search import compiled
from cqa_search.translation import FEATURE_NAMES, TranslationModel, segment_dp


def compositions(n, max_part):
    """Every segmentation of n positions into parts of at most max_part."""
    if n == 0:
        yield ()
        return
    for first in range(1, min(n, max_part) + 1):
        for rest in compositions(n - first, max_part):
            yield (first,) + rest


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 7), L=st.integers(1, 4))
def test_dp_matches_brute_force_enumeration(data, n, L):
    vals = data.draw(st.lists(st.one_of(st.just(-np.inf), st.floats(-5, 0)),
                              min_size=n * L, max_size=n * L))
    span = np.array(vals).reshape(1, n, L)
    total, best, best_segs = -np.inf, -np.inf, []
    for seg in compositions(n, L):
        end, lp = 0, 0.0
        for length in seg:
            end += length
            lp += span[0, end - 1, length - 1]
        total = np.logaddexp(total, lp)
        if lp > best + 1e-12:
            best, best_segs = lp, [seg]
        elif np.isfinite(lp) and abs(lp - best) <= 1e-12:
            best_segs.append(seg)
    alpha, _ = segment_dp(span, "sum")
    assert alpha[0, n] == pytest.approx(total, rel=1e-9, abs=1e-12) or total == alpha[0, n]
    vit, back = segment_dp(span, "max")
    assert vit[0, n] == pytest.approx(best, rel=1e-9, abs=1e-12) or best == vit[0, n]
    if np.isfinite(best):
        seg, p = [], n
        while p > 0:
            seg.append(int(back[0, p]))
            p -= seg[-1]
        assert tuple(seg[::-1]) in best_segs


def test_dp_example_and_mode_check():
    lp = np.log(np.array([[[0.5, 1.0], [0.5, 0.5]]]))
    lp[0, 0, 1] = -np.inf
    assert math.exp(segment_dp(lp)[0][0, 2]) == pytest.approx(0.75)
    assert math.exp(segment_dp(lp, "max")[0][0, 2]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match=r"mode must be one of \{'sum', 'max'\}; got 'avg'"):
        segment_dp(lp, "avg")


# -- a per-candidate reference of the eight features --------------------------------------
def reference(engine, model, text, row):
    q = engine.analyze(text)
    seq = q.sequence.tolist()
    T = model.translation_probs_.toarray().astype(np.float64)
    table, vocab = model.phrase_table_, model.phrase_table_.vocabulary_
    L, tight = vocab.max_length, not table.unaligned_edges
    qf = engine.index["question"]
    bg_raw = qf.stats.collection_prob
    bg = lambda t: bg_raw[t] if bg_raw[t] > 0 else 0.5 / qf.total_terms  # noqa: E731
    lam, beta = model.lam, model.beta
    has_answers = "answers" in engine.index.fields
    mu1 = model.question_weight if has_answers else 1.0
    doc = qf.terms_of(row).tolist()
    out = {}
    wt = tlm = 0.0
    for w in seq:
        if bg_raw[w] == 0:
            continue
        ptr = sum(T[1 + t, w] for t in doc) / len(doc) if doc else 0.0
        pml = doc.count(w) / len(doc) if doc else 0.0
        wt += math.log((1 - lam) * ptr + lam * bg(w))
        tlm += math.log((1 - lam) * (beta * ptr + (1 - beta) * pml) + lam * bg(w))
    out["wt"], out["translm"] = wt, tlm

    def align(X, Y, prob, null):          # eq. 9, NLTK's tie rule
        a = []
        for x in X:
            best, best_p = -1, null(x)
            for i, y in enumerate(Y):
                if prob(y, x) > 0 and prob(y, x) >= best_p:
                    best, best_p = i, prob(y, x)
            a.append(best)
        return a

    def enumerate_dp(X, Y, a, forward):
        """sum and max over segmentations of X; spans of the best one; PT and LW."""
        sums = {"pt": 0.0, "lw": 0.0}
        best, best_spans = -1.0, []
        for seg in compositions(len(X), L):
            p_pt = p_lw = 1.0
            spans, x1, ok = [], 0, True
            for length in seg:
                x2 = x1 + length - 1
                links = [a[x] for x in range(x1, x2 + 1) if a[x] >= 0]
                idx = -1
                if links and max(links) - min(links) < L and (
                        not tight or (a[x1] >= 0 and a[x2] >= 0)):
                    y1, y2 = min(links), max(links)
                    xs, ys = tuple(X[x1:x2 + 1]), tuple(Y[y1:y2 + 1])
                    t, w = (ys, xs) if forward else (xs, ys)
                    idx = table.find([vocab.phrase_id(t)], [vocab.phrase_id(w)])[0]
                if idx >= 0:
                    p_pt *= float((table.forward_ if forward else table.inverse_)[idx])
                    p_lw *= float((table.lex_forward_ if forward else table.lex_inverse_)[idx])
                    spans.append((y1, y2))
                elif length == 1:
                    p_pt *= lam * bg(X[x1])
                    p_lw *= lam * bg(X[x1])
                    spans.append(None)
                else:
                    ok = False
                    break
                x1 = x2 + 1
            if not ok:
                continue
            sums["pt"] += p_pt
            sums["lw"] += p_lw
            if p_pt > best * (1 + 1e-12):
                best, best_spans = p_pt, [spans]
            elif p_pt >= best * (1 - 1e-12):
                best_spans.append(spans)
        if model.segmentation == "max":
            sums = {"pt": best, "lw": None}
        return sums, best, best_spans

    parts = [(doc, mu1)]
    if mu1 < 1:
        parts.append((engine.index["answers"].terms_of(row).tolist(), 1 - mu1))
    values, viterbi = {"pt": 0.0, "lw": 0.0}, []
    for D, mu in parts:
        a = align(seq, D, lambda t, w: T[1 + t, w], lambda w: T[0, w])
        sums, best, best_spans = enumerate_dp(seq, D, a, True)
        if model.segmentation == "max":   # the LW rows are maximised on their own
            lw = max(math.prod(x) for x in lw_products(seq, D, a, table, vocab, L, tight,
                                                         lam, bg))
            sums["lw"] = lw
        values["pt"] += mu * sums["pt"]
        values["lw"] += mu * sums["lw"]
        viterbi.append((math.log(mu) + math.log(best), best_spans, a))
    out["ptrans_pt"], out["ptrans_lw"] = math.log(values["pt"]), math.log(values["lw"])
    a_inv = align(doc, seq, lambda w, t: T[1 + w, t], lambda t: T[0, t])
    inv, _, _ = enumerate_dp(doc, seq, a_inv, False)
    if model.segmentation == "max":
        inv["lw"] = max(math.prod(x) for x in lw_products(doc, seq, a_inv, table, vocab, L,
                                                            tight, lam, bg, forward=False))
    out["ptrans_ipt"] = math.log(inv["pt"]) if doc else 0.0
    out["ptrans_ilw"] = math.log(inv["lw"]) if doc else 0.0
    choice = 0 if len(viterbi) == 1 or viterbi[0][0] >= viterbi[1][0] else 1
    _, candidates, a = viterbi[choice]
    pas = set()
    for spans in candidates:
        real = [s for s in spans if s is not None]
        pas.add(sum(abs(real[k][0] - real[k - 1][1] - 1) for k in range(1, len(real))))
    out["ptrans_pa"] = pas.pop() if len(pas) == 1 else None     # None: tied Viterbi paths
    out["ptrans_uwp"] = sum(x < 0 for x in a) / len(seq)
    return out


def lw_products(X, Y, a, table, vocab, L, tight, lam, bg, forward=True):
    """Per segmentation, the list of lexical-weight factors (for the max form)."""
    for seg in compositions(len(X), L):
        factors, x1 = [], 0
        for length in seg:
            x2 = x1 + length - 1
            links = [a[x] for x in range(x1, x2 + 1) if a[x] >= 0]
            idx = -1
            if links and max(links) - min(links) < L and (
                    not tight or (a[x1] >= 0 and a[x2] >= 0)):
                y1, y2 = min(links), max(links)
                xs, ys = tuple(X[x1:x2 + 1]), tuple(Y[y1:y2 + 1])
                t, w = (ys, xs) if forward else (xs, ys)
                idx = table.find([vocab.phrase_id(t)], [vocab.phrase_id(w)])[0]
            if idx >= 0:
                factors.append(float((table.lex_forward_ if forward
                                      else table.lex_inverse_)[idx]))
            elif length == 1:
                factors.append(lam * bg(X[x1]))
            else:
                factors = None
                break
            x1 = x2 + 1
        if factors is not None:
            yield factors


QUERIES = ["stuffy nose cold steam", "visa renewal immigration office passport",
           "cheap sofa souq", "internet explorer browser download", "bank salary transfer",
           "garage mechanic engine battery jump"]


@pytest.mark.parametrize("implementation", ["numpy", "numba"])
@pytest.mark.parametrize("params", [
    {},
    {"unaligned_edges": False},
    {"question_weight": 1.0},
    {"segmentation": "max", "unaligned_edges": False},
])
def test_features_match_the_reference(gap_engine, gap_model, params, implementation):
    before = compiled._chosen
    try:
        compiled.use("auto")
        if implementation == "numba" and not compiled.load():
            pytest.skip("numba is not installed")
        compiled.use(implementation)
        _check_against_reference(gap_engine, gap_model, params)
    finally:
        compiled._chosen = before


def _check_against_reference(gap_engine, gap_model, params):
    model = gap_model if not params else TranslationModel(
        textrank=False, max_iter=5, tol=None, min_prob=0.0, title_body=True,
        **params).fit(gap_engine.view)
    scorer = model.scorer(gap_engine.view)
    assert scorer.names == FEATURE_NAMES
    qfield = gap_engine.index["question"]
    rows = np.flatnonzero(qfield.doc_len <= 9)[:25]
    n_compared = 0
    for text in QUERIES:
        q = gap_engine.analyze(text)
        got = scorer.score(q, rows)
        assert np.all(np.isfinite(got))
        for k, row in enumerate(rows):
            ref = reference(gap_engine, model, text, int(row))
            for j, name in enumerate(FEATURE_NAMES):
                if ref[name] is None:
                    continue
                assert got[k, j] == pytest.approx(ref[name], rel=1e-9, abs=1e-9), (text, row, name)
                n_compared += 1
    assert n_compared > 0.95 * len(QUERIES) * len(rows) * len(FEATURE_NAMES)


def test_translm_without_translation_is_the_lm_jm_feature(gap_index, gap_model, tmp_path):
    engine = SearchEngine.open(gap_index)
    model = TranslationModel(**{**gap_model.get_params(), "beta": 0.0})
    model.ibm1_, model.phrase_table_ = gap_model.ibm1_, gap_model.phrase_table_
    scorer = model.scorer(engine.view)
    for text in QUERIES:
        res = engine.with_config(SearchConfig(ranker=None)).search(text, k=None)
        rows = engine.archive.rows(res.doc_ids)
        q = engine.analyze(text)
        np.testing.assert_allclose(scorer.score(q, rows)[:, 1],
                                   res.features[:, res.feature_names.index("lm_jm")],
                                   rtol=1e-10)


def test_edge_cases(gap_engine, gap_model, tmp_path):
    scorer = gap_model.scorer(gap_engine.view)
    q = gap_engine.analyze("zzzz unknownword")           # no known term
    assert np.all(scorer.score(q, np.arange(5)) == 0)
    assert scorer.score(gap_engine.analyze("visa"), np.zeros(0, np.int64)).shape == (0, 8)


def test_the_inverse_direction_reads_the_first_words_of_a_long_candidate(gap_engine, gap_model,
                                                                        monkeypatch):
    """ptrans_ipt and ptrans_ilw read the first MAX_INVERSE_POSITIONS words of a question
    (the DP is dense over the longest candidate: a question of megabytes took gigabytes
    and tens of seconds); the other features, and both for shorter questions, are those
    of the whole question, and a row scores the same alone as among others."""
    from cqa_search.translation import scoring

    scorer = gap_model.scorer(gap_engine.view)
    lengths = gap_engine.index["question"].doc_len
    rows = np.flatnonzero(lengths > 0)[:40]
    limit = int(np.median(lengths[rows]))
    inverse = [FEATURE_NAMES.index("ptrans_ipt"), FEATURE_NAMES.index("ptrans_ilw")]
    others = [j for j in range(len(FEATURE_NAMES)) if j not in inverse]
    short = lengths[rows] <= limit
    assert short.any() and not short.all()
    for text in QUERIES[:3]:
        q = gap_engine.analyze(text)
        whole = scorer.score(q, rows)
        monkeypatch.setattr(scoring, "MAX_INVERSE_POSITIONS", limit)
        capped = scorer.score(gap_engine.analyze(text), rows)
        monkeypatch.undo()
        assert np.isfinite(capped).all()
        np.testing.assert_array_equal(capped[:, others], whole[:, others])
        np.testing.assert_array_equal(capped[short][:, inverse], whole[short][:, inverse])
        assert not np.array_equal(capped[~short][:, inverse], whole[~short][:, inverse])
        monkeypatch.setattr(scoring, "MAX_INVERSE_POSITIONS", limit)
        alone = [scorer.score(gap_engine.analyze(text), rows[[k]])[0] for k in range(len(rows))]
        monkeypatch.undo()
        np.testing.assert_allclose(np.array(alone), capped, rtol=1e-12)


def test_question_only_index(tmp_path):
    """Without the answers field only the question part is scored (mu1 = 1)."""
    from cqa_search import Question
    qs = [Question(f"q{i}", f"visa renewal office {i % 3}",
                   answers=("immigration passport letter", "office sponsor")) for i in range(8)]
    path = tmp_path / "idx"
    build_index(qs, path, fields=("question",))
    engine = SearchEngine.open(path)
    model = TranslationModel(textrank=False, tol=None, max_iter=3).fit(engine.view)
    scorer = model.scorer(engine.view)
    got = scorer.score(engine.analyze("visa immigration"), np.arange(8))
    assert np.all(np.isfinite(got))
    ref = reference(engine, model, "visa immigration", 0)
    for j, name in enumerate(FEATURE_NAMES):
        if ref[name] is not None:
            assert got[0, j] == pytest.approx(ref[name], rel=1e-9)


# -- the scorer's DP kernels against segment_dp ----------------------------------------------
@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 10_000), n_rows=st.integers(1, 12), P=st.integers(1, 40),
       L=st.integers(1, 5), tiny=st.booleans())
def test_dp_kernels_match_segment_dp(seed, n_rows, P, L, tiny):
    """Probability-space sums (rescaled) and log-space Viterbi give segment_dp's values,
    for rows of different lengths, impossible spans and, with ``tiny``, probabilities down
    to float32's smallest normal numbers."""
    from cqa_search.translation.scoring import _sum_dp, _viterbi, _FLOOR
    rng = np.random.default_rng(seed)
    low = -87.0 if tiny else -6.0                 # exp(-87) ~ 1.6e-38
    logp = rng.uniform(low, 0.0, (n_rows, P, L))
    logp[rng.random((n_rows, P, L)) < 0.4] = -np.inf
    logp[:, :, 0] = np.where(np.isfinite(logp[:, :, 0]), logp[:, :, 0], low)  # length 1 exists
    lengths = np.sort(rng.integers(0, P + 1, n_rows))[::-1]
    probs = np.exp(logp[:, :, ::-1]).transpose(1, 2, 0).copy()   # (P, L, rows), reversed
    with np.errstate(divide="ignore"):
        logp = np.log(probs).transpose(2, 0, 1)[:, :, ::-1]    # what the scorer logs
    final = _sum_dp(probs, lengths)
    for r in range(n_rows):
        alpha, _ = segment_dp(logp[r:r + 1, :lengths[r]], "sum")
        assert final[r] == pytest.approx(alpha[0, -1], rel=1e-12, abs=1e-12)
    vit, back = _viterbi(probs)
    ref, ref_back = segment_dp(logp, "max")
    np.testing.assert_allclose(vit, ref, rtol=1e-13, atol=0)
    assert np.array_equal(back, ref_back)
    head = (n_rows + 1) // 2                            # the first rows only
    vit, back = _viterbi(probs, head)
    np.testing.assert_allclose(vit, ref[:head], rtol=1e-13, atol=0)
    assert np.array_equal(back, ref_back[:head])
    if compiled.load():  # the compiled twins give the numpy paths' values to rounding (the
        # sums: numpy's einsum may associate the terms otherwise; Viterbi: libm's log may
        # differ from numpy's in the last bit), the same segmentations
        from cqa_search.translation.scoring import _RESCALE, _sum_dp_numpy, _viterbi_numpy
        running = np.searchsorted(-lengths, -np.arange(P + 1), side="right")
        with np.errstate(divide="ignore"):
            want = _sum_dp_numpy(probs, lengths, running)
            floored = np.maximum(np.log(probs), _FLOOR)
        np.testing.assert_allclose(compiled.sum_dp(probs, lengths, running, _RESCALE), want,
                                   rtol=1e-13, atol=0)
        for rows in (n_rows, head):
            (pad, back), (want_pad, want_back) = (compiled.viterbi(probs, rows, _FLOOR),
                                                  _viterbi_numpy(floored[:, :, :rows]))
            np.testing.assert_allclose(pad, want_pad, rtol=1e-13, atol=0)
            assert np.array_equal(back, want_back)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 6), n_terms=st.integers(1, 5),
       n_words=st.integers(1, 6), n_pairs=st.integers(0, 20))
def test_compiled_alignment_is_the_numpy_one(seed, n, n_terms, n_words, n_pairs):
    """Eq. 9's winners (largest probability, at least NULL's, the last position among
    ties) and the word-translation sums are the same in one compiled pass over the
    query's table rows as by numpy's entries, group reductions and bincount."""
    from cqa_search.translation.scoring import TranslationScorer, _Pairs, _QueryTables
    if not compiled.load():
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(seed)
    tables = object.__new__(_QueryTables)        # the rows of P(w | word), w a query term
    sizes = rng.integers(0, n_terms + 1, n_words)
    tables.f_indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    tables.f_term = np.concatenate([rng.choice(n_terms, k, replace=False) for k in sizes]
                                   ).astype(np.int64)
    tables.f_prob = rng.choice([0.0, 0.1, 0.25, 0.5], int(sizes.sum()))  # ties and zeros
    doc = np.sort(rng.integers(0, n, n_pairs))                  # (candidate, word) pairs
    row = rng.integers(0, n_words, n_pairs)
    last = rng.integers(0, 9, n_pairs)
    count = rng.integers(1, 4, n_pairs).astype(np.float64)
    p_null = rng.choice([0.0, 0.2, 0.3], n_terms)
    pairs = object.__new__(_Pairs)
    pairs.n, pairs.n_terms, pairs.sums = n, n_terms, None
    pair, pairs.term, pairs.prob = tables.forward_entries(row)
    pairs.doc, pairs.last, pairs.count = doc[pair], last[pair], count[pair]
    aligned, sums = compiled.align(doc, row, last, count, tables.f_indptr, tables.f_term,
                                   tables.f_prob, p_null, n, n_terms)
    assert np.array_equal(aligned.reshape(n, n_terms),
                          TranslationScorer._align_numpy(pairs, p_null))
    assert np.array_equal(sums.reshape(n, n_terms), pairs.translation_sums())


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 5), P=st.integers(0, 9),
       L=st.integers(1, 4), tight=st.booleans(), per_row=st.booleans())
def test_compiled_hull_spans_are_the_numpy_ones(seed, n, P, L, tight, per_row):
    """The bi-phrase candidates (windows holding a link whose links span at most L
    positions, in the table, tight or not, inside each row's length) come out the same,
    in the same order."""
    from cqa_search.translation.scoring import _hull_spans_numpy
    if not compiled.load():
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(seed)
    A = np.where(rng.random((n, P)) < 0.3, -1, rng.integers(0, 8, (n, P))).astype(np.int64)
    known = rng.random((L, n if per_row else 1, P)) < 0.8
    lengths = rng.integers(0, P + 1, n)
    for bound in (np.full(n, P), lengths):
        want = _hull_spans_numpy(A, L, tight, known, bound)
        got = compiled.hull_spans(A, L, tight, known, bound)
        assert len(got) == len(want) == 5
        for g, w in zip(got, want):
            assert g.tolist() == w.tolist()
    # a row's bound keeps exactly its windows that end inside it
    full = _hull_spans_numpy(A, L, tight, known, np.full(n, P))
    inside = full[2] + full[0] <= lengths[full[1]]
    for g, w in zip(_hull_spans_numpy(A, L, tight, known, lengths), full):
        assert g.tolist() == w[inside].tolist()


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 5), J=st.integers(1, 12),
       L=st.integers(1, 4))
def test_compiled_distortion_is_the_numpy_one(seed, n, J, L):
    """The phrase-alignment feature walked along any Viterbi back-pointers (each a phrase
    length that fits) is the numpy path's sum."""
    from cqa_search.translation.scoring import TranslationScorer
    if not compiled.load():
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(seed)
    back = np.zeros((n, J + 1), dtype=np.int8)
    for p in range(1, J + 1):
        back[:, p] = rng.integers(1, min(L, p) + 1, n)
    S1 = rng.integers(0, 30, (n, J, L))
    S2 = rng.integers(0, 30, (n, J, L))
    BG = rng.random((n, J)) < 0.3
    want = TranslationScorer._distortion_numpy(back, S1, S2, BG)
    assert np.array_equal(compiled.distortion(back, S1, S2, BG), want)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10_000), n_rows=st.integers(1, 12), n_cols=st.integers(1, 9),
       n_terms=st.integers(0, 6), density=st.sampled_from([0.0, 0.2, 0.7]))
def test_compiled_query_tables_are_numpys(seed, n_rows, n_cols, n_terms, density):
    """The forward table of the query terms' columns grouped by archive word (stably)
    and the inverse maxima: the compiled pass gives numpy's gather, sort and scatter."""
    import scipy.sparse as sp

    from cqa_search.translation.scoring import _QueryTables
    if not compiled.load():
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((n_rows, n_cols)) < density,
                     rng.choice([0.25, 0.5, 1.0], (n_rows, n_cols)), 0).astype(np.float32)
    csc = sp.csc_matrix(dense)
    terms = np.sort(rng.choice(n_cols, min(n_terms, n_cols), replace=False)).astype(np.int64)
    want = object.__new__(_QueryTables)
    want._forward_numpy(csc, terms, n_rows)
    got = compiled.forward_table(csc, terms)
    assert got[0] == want.f_zero
    for g, w in zip(got[1:], (want.f_map, want.f_indptr, want.f_term, want.f_prob)):
        assert g.dtype == w.dtype and g.tolist() == w.tolist()
    keys = rng.integers(0, n_rows, 3 * n_cols)
    values = rng.choice([0.0, 0.25, 0.5, 1.0], len(keys)).astype(np.float32)
    maxima = rng.random(n_rows)
    expected = maxima.copy()
    np.maximum.at(expected, keys, values)
    compiled.scatter_max(maxima, keys, values)
    assert np.array_equal(maxima, expected)
