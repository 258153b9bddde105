from cqa_search.analysis import Analyzer
from cqa_search.presentation import Suggester, highlight
from cqa_search.query_parser import ParsedQuery, parse_query


def test_parse_query():
    assert parse_query('category:"Doha Shopping" cheap sofa?') == \
        ParsedQuery("cheap sofa?", "Doha Shopping")
    assert parse_query("category:Travel lost passport") == ParsedQuery("lost passport", "Travel")
    assert parse_query('router "reset button" NOT wifi') == ParsedQuery("router reset button")
    assert parse_query("") == ParsedQuery("")


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
