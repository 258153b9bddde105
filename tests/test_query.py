from cqa_search.analysis import Analyzer
from cqa_search.presentation import MAX_SUGGESTED_WORD, Suggester, highlight
from cqa_search.query_parser import ParsedQuery, Unit, parse_query


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


def test_parse_required_excluded_and_fields():
    assert parse_query("+visa renew -work") == ParsedQuery(
        "visa renew", must=((U("question", "visa"),),), must_not=((U("question", "work"),),))
    assert parse_query("visa AND renew") == ParsedQuery(
        "visa renew", must=((U("question", "visa"),), (U("question", "renew"),)))
    assert parse_query("(visa OR permit) AND renew").must == (
        (U("question", "visa"), U("question", "permit")), (U("question", "renew"),))
    assert parse_query("title:visa answers:passport tag:family x") == ParsedQuery(
        "visa passport family x", must=((U("title", "visa"),), (U("answers", "passport"),),
                                        (U("tag", "family"),)))
    assert parse_query("NOT (a AND b) c").must_not == ((U("question", "a"), U("question", "b")),)
    # operators only at the start of a word; unknown prefixes are words
    assert parse_query("C++ e-mail foo:bar").text == "C++ e-mail foo:bar"


def test_unreadable_syntax_falls_back_to_its_words():
    assert parse_query("NOT NOT NOT") == ParsedQuery("NOT NOT NOT")
    assert parse_query("[a TO z] visa").text == "visa"


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
