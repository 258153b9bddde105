import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search.analysis import Analyzer
from cqa_search.exceptions import QueryError
from cqa_search.presentation import MAX_SUGGESTED_WORD, Suggester, highlight
from cqa_search.archive import END_OF_DATES, FIRST_DATE
from cqa_search.query_parser import (_LONE_SIGN, ParsedQuery, Unit, _common_syntax, _parsed,
                                     Filters, parse_query, without_empty_units)


def U(field, *words, phrase=False):
    return Unit(field, tuple(words), phrase)


def test_parse_query():
    assert parse_query('category:"Doha Shopping" cheap sofa?') == \
        ParsedQuery("cheap sofa?", "Doha Shopping")
    assert parse_query("category:Travel lost passport") == ParsedQuery("lost passport", "Travel")
    assert parse_query('router "reset button" NOT wifi') == ParsedQuery(
        "router reset button", must=((U("question", "reset", "button", phrase=True),),),
        must_not=((U("question", "wifi"),),))
    assert parse_query("") == ParsedQuery("")
    assert parse_query("how do I reset my router?") == ParsedQuery("how do I reset my router?")
    # a category left out; one category a query
    for typed in ("-category:Health water", "NOT category:Health water"):
        assert parse_query(typed) == ParsedQuery("water", not_categories=("Health",))
    assert parse_query("category:Pets category:pets dog") == ParsedQuery("dog", "Pets")
    # an unclosed quote is no part of the name (the engine's error suggests the category)
    assert parse_query('category:"Doha Shopping sofa').category == "Doha"
    with pytest.raises(QueryError, match="a query keeps one category; got 'Pets' and 'Nope'"):
        parse_query("category:Pets category:Nope dog")


def test_parse_required_excluded_and_fields():
    assert parse_query("+visa renew -work") == ParsedQuery(
        "visa renew", must=((U("question", "visa"),),), must_not=((U("question", "work"),),))
    assert parse_query("+visa +renew") == ParsedQuery(
        "visa renew", must=((U("question", "visa"),), (U("question", "renew"),)))
    # AND is an operator in a query with other syntax (in plain text: a word, see
    # test_operator_words_are_words_in_plain_text)
    assert parse_query("-fee visa AND renew") == ParsedQuery(
        "visa renew", must=((U("question", "visa"),), (U("question", "renew"),)),
        must_not=((U("question", "fee"),),))
    assert parse_query("(visa OR permit) AND renew").must == (
        (U("question", "visa"), U("question", "permit")), (U("question", "renew"),))
    # an exact tag filters: its words score only in a query without other words
    assert parse_query("title:visa answers:passport tag:family x") == ParsedQuery(
        "visa passport x", must=((U("title", "visa"),), (U("answers", "passport"),),
                                 (U("tag", "family"),)))
    assert parse_query("tag:quantum-gate hadamard").text == "hadamard"
    assert parse_query("tag:quantum-gate").text == "quantum-gate"
    assert parse_query("NOT (a AND b) c").must_not == ((U("question", "a"), U("question", "b")),)
    assert parse_query("tags:family Tag:c++ x").must == ((U("tags", "family"),), (U("tag", "c++"),))
    assert parse_query("x date:2014 DATE:>=2014-06") == ParsedQuery(
        "x", dates=((1388534400, 1420070400), (1401580800, None)))
    # prose: a field name without its value is no filter (nor searched: a notice says so)
    assert parse_query("Date: tomorrow") == ParsedQuery("tomorrow", notices=(
        "'Date:' has no value right after its colon: left out (write e.g. "
        "date:>=2014-01-01)",))
    # operators only at the start of a word; unknown prefixes are words
    assert parse_query("C++ e-mail foo:bar").text == "C++ e-mail foo:bar"
    # an OR between fields or phrases is one requirement either side meets; side by side,
    # each is a requirement
    title = (U("title", "laptop"), U("title", "oil"))
    assert parse_query("title:laptop OR title:oil").must == (title,)
    assert parse_query("title:(laptop OR oil)").must == (title,)
    assert parse_query("title:laptop title:oil").must == ((title[0],), (title[1],))
    assert parse_query('"stuffy nose" OR laptop').must == (
        (Unit("question", ("stuffy", "nose"), True), U("question", "laptop")),)
    assert parse_query("laptop OR oil").must == ()
    # field names in any case; a capitalised word before a colon and a space is prose
    assert parse_query("Category:Travel TITLE:visa x") == ParsedQuery(
        "visa x", category="Travel", must=((U("title", "visa"),),))
    assert parse_query("Title: the movie").text == "the movie"


_WORDS = st.one_of(st.text("abAND", min_size=1, max_size=3),
                   st.text("ab'.:-+(^~2\"\n", min_size=1, max_size=4))
_CLAUSES = st.one_of(_WORDS, st.builds(lambda sign, w: sign + w, st.sampled_from("+-"), _WORDS),
                     st.builds(lambda sign, ws: f'{sign}"{" ".join(ws)}"',
                               st.sampled_from(["", "+", "-"]),
                               st.lists(_WORDS, max_size=3)))


@settings(max_examples=500)
@given(st.lists(_CLAUSES, min_size=1, max_size=6), st.sampled_from([" ", "  ", " \t", "\n"]))
def test_common_syntax_is_read_as_whoosh_reads_it(clauses, space):
    """The common syntax (words, +word, -word, quoted phrases) is read without whoosh's
    parser; wherever the quick reading applies it is whoosh's (the oracle)."""
    typed = space.join(clauses)
    quick = _common_syntax(typed)
    if quick is not None and not _PUNCTUATION.search(typed):
        assert quick == _parsed(typed), typed


_PUNCTUATION = re.compile(r"[()\[\]{}:'^]")


@given(st.lists(_CLAUSES, min_size=1, max_size=6))
def test_punctuation_in_the_common_syntax_only_separates_words(clauses):
    """Brackets, colons and single quotes in the common syntax are punctuation: read as a
    comma would be (a character of a word, which whoosh reads as the oracle test says)."""
    typed = " ".join(clauses)
    if _common_syntax(_LONE_SIGN.sub(" ", typed)) is None or not _PUNCTUATION.search(typed):
        return
    quick, plain = parse_query(typed), parse_query(_PUNCTUATION.sub(",", typed))
    analyzer = Analyzer()

    def terms(parsed):
        return [[tuple(analyzer.analyze(" ".join(u.words))) for u in g] for g in parsed]

    assert sorted(analyzer.analyze(quick.text)) == sorted(analyzer.analyze(plain.text))
    assert terms(quick.must) == terms(plain.must)
    assert terms(quick.must_not) == terms(plain.must_not)


def test_prose_punctuation_is_not_syntax():
    typed = 'Engineer(construction) "work visa" :) my question is: salary [2 months]'
    assert _common_syntax(typed) == ParsedQuery(
        "Engineer(construction) work visa :) my question is: salary [2 months]",
        must=((U("question", "work", "visa", phrase=True),),))
    for syntax in ('title:visa "a b"', '"a b" +(c d)', '"a b" [a TO z]', '"a b" c^2',
                   '"a b" c OR d'):
        assert _common_syntax(syntax) is None, syntax


def test_common_syntax_takes_prose_with_quotations():
    typed = 'my "residence permit" expired, what now? don\'t say -"tourist visa" +fine'
    assert _common_syntax(typed) == _parsed(typed) == ParsedQuery(
        "fine my residence permit expired, what now? don't say",
        must=((U("question", "fine"),), (U("question", "residence", "permit", phrase=True),)),
        must_not=((U("question", "tourist", "visa", phrase=True),),))


def test_a_sign_alone_between_spaces_is_punctuation():
    assert parse_query("Dress up night in - any ideas?") == ParsedQuery(
        "Dress up night in any ideas?")
    assert parse_query('visa + "work permit" - renew -fee') == ParsedQuery(
        "visa work permit renew", must=((U("question", "work", "permit", phrase=True),),),
        must_not=((U("question", "fee"),),))


def test_operator_words_are_words_in_plain_text():
    """A pasted question keeps its words: NOT, AND and OR are operators only next to
    other syntax, and the notice says what they were read as."""
    for typed in ("I can NOT sleep at night", "MY CAR WILL NOT START AND I NEED HELP",
                  "visa AND renew", "NOT visa", "visa OR permit"):
        parsed = parse_query(typed)
        assert (parsed.text, parsed.must, parsed.must_not) == (typed, (), ()), typed
        assert parsed.filters() == ()
    assert parse_query("I can NOT sleep at night").notices == (
        'NOT was searched as a word (operators only next to other syntax: +word, -word, "a '
        "phrase\", field:value, brackets); -sleep leaves out the questions with 'sleep'",)
    assert parse_query("WILL NOT START AND STOP").notices[0].startswith(
        "NOT and AND were searched as words") and parse_query(
        "WILL NOT START AND STOP").notices[0].endswith(
        "-START leaves out the questions with 'START'; +START +STOP requires both")
    assert parse_query("visa OR permit").notices == ()  # OR as a word asks the same
    assert parse_query("a business visa and NOT a working visa").notices[0].endswith(
        "-working leaves out the questions with 'working'")  # (not "-a")
    # next to other syntax they are operators: a field, a phrase, a sign, a date, brackets
    sleep = ((U("question", "sleep"),),)
    for typed in ('"can not" NOT sleep', "title:night NOT sleep", "+night NOT sleep",
                  "night date:2014 NOT sleep", "night NOT (sleep)", "(night OR day) NOT sleep"):
        parsed = parse_query(typed)
        assert parsed.must_not == sleep and parsed.notices == (), typed
    # brackets without an operator next to them are prose, and so is a "word" in quotes
    # (it asks nothing of the word)
    assert parse_query("I can NOT sleep (at all)").must_not == ()
    assert parse_query('a "good" sofa in Doha? NOT IKEA please').must_not == ()
    # and so is a number with a sign (the beer 5 days past its date, -5 degrees outside)
    assert parse_query("beer -5 days old? I can NOT tell").must_not == ()
    assert set(parse_query("beer -5 days +old? NOT tell").must_not) == {
        (U("question", "5"),), (U("question", "tell"),)}  # (next to other syntax: a sign)
    assert parse_query('a "good sofa" in Doha? NOT IKEA').must_not == (
        (U("question", "IKEA"),),)


def test_a_field_without_a_value_is_left_out_with_a_notice(toy_engine):
    for typed in ("tag: dogs", "dogs tag:", "-tag: dogs", "TAG: dogs", "dogs\ttag:"):
        parsed = parse_query(typed)
        assert parsed.text.split() == ["dogs"] and not parsed.has_filters, typed
        assert len(parsed.notices) == 1 and "e.g. tag:machine-learning" in parsed.notices[0]
    assert parse_query("title: category: date: x").notices == tuple(
        f"'{name}:' has no value right after its colon: left out (write e.g. {example})"
        for name, example in [("title", "title:visa"), ("category", "category:Travel"),
                              ("date", "date:>=2014-01-01")])
    with pytest.raises(QueryError, match=r"empty query: .*'tag:' has no value"):
        toy_engine.search("tag:")
    res = toy_engine.search("visa tag:")
    assert res.query == "visa" and res.parsed.notices and len(res)


def test_filters_say_what_a_query_applies():
    assert parse_query('router "reset button" NOT wifi -(a AND b) category:"Doha Shopping" '
                       "-category:Travel tag:c++ date:>=2014-03 date:<2015").filters() == (
        '"reset button"', "tag:c++", "-wifi", "-(a AND b)", 'category:"Doha Shopping"',
        "-category:Travel", "date:>=2014-03-01", "date:<2015-01-01")
    assert parse_query("+(visa OR permit) renew date:2014-01..2014-02").filters() == (
        "+(visa OR permit)", "date:2014-01-01..2014-02-28")
    # what filters() writes reads back as the same filters
    for typed in ('"reset button" -wifi tag:c++ +(title:visa OR permit) -(a AND b)',
                  "+visa +renew -category:Travel date:2014"):
        once = parse_query(typed)
        again = parse_query(" ".join(once.filters()))
        assert again.filters() == once.filters(), typed


DEC_9999, DAY_9999 = 253399622400, 253402214400  # 9999-12-01, 9999-12-31


@pytest.mark.parametrize("typed,dates,written", [
    ("date:9999-12-31", (DAY_9999, END_OF_DATES), "date:9999-12-31..9999-12-31"),
    ("date:9999-12", (DEC_9999, END_OF_DATES), "date:9999-12-01..9999-12-31"),
    ("date:9999", (253370764800, END_OF_DATES), "date:9999-01-01..9999-12-31"),
    ("date:>=9999-12-31", (DAY_9999, None), "date:>=9999-12-31"),
    ("date:<=9999", (None, END_OF_DATES), "date:<=9999-12-31"),
    ("date:..9999-12", (None, END_OF_DATES), "date:<=9999-12-31"),
    ("date:9999-12..", (DEC_9999, None), "date:>=9999-12-01"),
    ("date:<9999-12-31", (None, DAY_9999), "date:<9999-12-31"),
    ("date:0001", (FIRST_DATE, -62104060800), "date:0001-01-01..0001-12-31"),
    ("date:>=0001", (FIRST_DATE, None), "date:>=0001-01-01"),
])
def test_dates_at_the_end_of_the_calendar(typed, dates, written):
    """Issue 43: a period ending with 9999-12-31 overflowed (date:9999-12-31) or found no
    end (date:9999-12 asked for year 10000; date:9999 and date:>9999 gave None bounds):
    it ends at END_OF_DATES, the second after the calendar, and is written back."""
    parsed = parse_query(f"visa {typed}")
    assert parsed.dates == (dates,) and parsed.filters() == (written,)
    assert parse_query(f"visa {written}").dates == (dates,)


@pytest.mark.parametrize("typed,message", [
    ("date:>9999", "no question is dated after 9999-12-31 (dates run from 0001-01-01 to "
                   "9999-12-31)"),
    ("date:>9999-12-31", "no question is dated after 9999-12-31"),
    ("date:<0001", "no question is dated before 0001-01-01"),
    ("date:0000", "year 0 is out of range"),
    ("date:10000", "write date:2014"),
])
def test_filters_that_keep_no_date_are_refused(typed, message):
    with pytest.raises(QueryError, match=re.escape(f"bad date filter {typed!r}: {message}")):
        parse_query(f"visa {typed}")


def test_after_and_before_at_the_end_of_the_calendar():
    assert Filters(after="9999-12", before="9999-12-31").apply(parse_query("visa")).dates == (
        (DEC_9999, None), (None, DAY_9999))
    with pytest.raises(QueryError, match="'date:>=10000'"):
        Filters(after="10000")


def test_unreadable_syntax_falls_back_to_its_words():
    # (plain text since operators act only next to other syntax: see above)
    assert parse_query("title:x NOT NOT NOT") == ParsedQuery("title x NOT NOT NOT", notices=(
        "the query syntax could not be read (an operator without a word on each side?): "
        "its words were searched, without filters",))
    assert parse_query("[a TO z] visa") == ParsedQuery("visa", notices=(
        "[a TO z]: a range is no filter here (dates: date:2014-01..2014-06), left out",))
    assert parse_query("title:{1 TO } x").notices[0].startswith("title:[1 TO ]: a range")
    assert len(parse_query("tag: [a TO z] x date:2014").notices) == 2  # every notice kept


def test_highlight_fragments_and_marks():
    text = "Renewing a visa. " + "Filler words here. " * 10 + "The visa office."
    out = highlight(text, {"visa"}, Analyzer(), start="<", end=">", whole=False)
    assert "<visa>" in out and " ... " in out
    assert highlight("nothing here", {"visa"}, Analyzer()) == "nothing here"


def test_suggester_ranks_by_distance_then_frequency():
    s = Suggester({"hospital": 9, "hostel": 3, "hospitals": 1, "visa": 5, "vise": 50})
    assert s.suggest("hospitel") == ["hospital", "hostel", "hospitals"]
    assert s.suggest("vsa") == ["visa"]
    assert s.suggest("qqqqqq") == []
    assert s.suggest("h" * (MAX_SUGGESTED_WORD + 1)) == []  # no automaton for huge words
    # a number is no misspelling (a pasted phone number: +974 4444 5555)
    numbers = Suggester({"444": 3, "4x4": 2, "440": 1})
    assert numbers.suggest("4444") == [] and numbers.suggest("4x44") == ["444", "4x4", "440"]


def test_a_boost_weighs_its_words():
    parsed = parse_query("title:visa^2 renew (office permit)^1.5 \"work permit\"^3 visa")
    assert parsed.text == "visa renew office permit work permit visa"
    assert parsed.boosts == (("visa", 2.0), ("office", 1.5), ("permit", 1.5), ("work", 3.0),
                             ("permit", 3.0))
    assert parsed.must == ((U("title", "visa"),), (U("question", "work", "permit", phrase=True),))
    assert parsed.notices == ()
    assert parse_query("+visa^1.5 renew").boosts == (("visa", 1.5),)
    assert parse_query("(visa OR permit)^3 renew").boosts == (("visa", 3.0), ("permit", 3.0))
    # a caret without a number is prose, as before
    assert parse_query("visa^ x^y").boosts == ()


def test_a_boost_that_cannot_apply_is_ignored_with_a_notice():
    why = ("(a boost above 0 weighs a word that ranks the results; a left-out word, a tag "
           "or a category ranks nothing)")
    parsed = parse_query("visa -used^3 category:Visas^2 renew^0")
    assert parsed.text == "visa renew" and parsed.boosts == ()
    assert parsed.category == "Visas" and parsed.must_not == ((U("question", "used"),),)
    assert parsed.notices == ("category:Visas^2, renew^0 and -used^3: the boosts were "
                              f"ignored {why}",)
    assert parse_query("visa NOT (work AND permit^2)").notices == (
        f"-permit^2: the boost was ignored {why}",)
    # a word the index does not hold (a stopword, too short): nothing to boost
    kept = without_empty_units(parse_query("the^2 visa^2"), Analyzer().analyze)
    assert kept.boosts == (("visa", 2.0),) and kept.notices == (
        "the^2: the boost was ignored (its word is not in the index: stopwords and words too "
        "short to index are not)",)


def test_a_boost_multiplies_the_query_frequency(toy_engine):
    """``renew^2`` scores as ``renew renew`` (every term model multiplies qtf), in the
    retrieval model and in the term features; ``^0.5`` halves it."""
    import numpy as np

    boosted, repeated = toy_engine.search("renew^2 visa", k=5), toy_engine.search(
        "renew renew visa", k=5)
    assert boosted.doc_ids == repeated.doc_ids
    np.testing.assert_allclose(boosted.scores, repeated.scores, rtol=1e-12)
    np.testing.assert_allclose(boosted.features, repeated.features, rtol=1e-12)
    q = toy_engine.analyze("renew visa")
    half = toy_engine.search("renew^0.5 visa", k=None)
    config = toy_engine.config.retrieval
    expected = config.score_rows(config.field_index(toy_engine.index), q.term_ids,
                                 np.where(q.term_ids == toy_engine.index.vocab.id("renew"),
                                          0.5, 1.0), toy_engine.searcher.rows(half.doc_ids))
    np.testing.assert_allclose(half.scores, expected, rtol=1e-6)
    # a filter's word keeps its filter and weighs its boost
    res = toy_engine.search("title:visa^3 renew", k=None)
    assert res.parsed.filters() == ("title:visa",) and len(res)
    assert toy_engine.search("the^2 visa").parsed.notices[0].startswith("the^2: the boost was "
                                                                         "ignored")


def test_a_tag_filter_never_scores_and_an_unknown_tag_gets_a_did_you_mean(tmp_path):
    """tag:quantum-gate beside other words filters only: "quantum" and "gate" do not rank
    (a question about gates without the tag is not found first); a tag no question has
    leaves a notice naming the tags meant."""
    from cqa_search import Question, SearchEngine, build_index

    build_index([Question("a", "hadamard gate on a qubit", tags=("quantum-gate",)),
                 Question("b", "hadamard matrix of order four", tags=("quantum-gate",)),
                 Question("c", "gate quantum hadamard quantum gate", tags=("logic",))],
                tmp_path / "idx")
    engine = SearchEngine.open(tmp_path / "idx")
    found = engine.search("tag:quantum-gate hadamard")
    assert found.query_terms == ("hadamard",) and set(found.doc_ids) == {"a", "b"}
    same = engine.search("hadamard", tags=["quantum-gate"])
    assert list(found.doc_ids) == list(same.doc_ids)
    assert found.scores.tolist() == pytest.approx(same.scores.tolist())
    assert found.parsed.notices == ()
    # alone, the tag's words rank the questions that have it
    assert set(engine.search("tag:quantum-gate").doc_ids) <= {"a", "b"}
    missing = engine.search("tag:gate hadamard")
    assert len(missing) == 0 and missing.parsed.notices == (
        "tag:gate: no question has this tag; did you mean tag:quantum-gate?",)
    assert engine.search("hadamard", tags=["zzz"]).parsed.notices == (
        "tag:zzz: no question has this tag",)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=list('ab ANDORNOT:^[{-+()"TOtitlecategory12.x'), max_size=30))
def test_has_syntax_shortcut_agrees_with_the_patterns(text):
    """Text without any of the syntax's characters skips the patterns: the same answer."""
    from cqa_search import query_parser as qp

    full = bool(qp._SYNTAX.search(text)) or ('"' in text and any(
        len(m.group(1).split()) > 1 for m in qp._PHRASE.finditer(text)))
    assert qp._has_syntax(text) == full
