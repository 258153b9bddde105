"""StackExchange dump reader: the fixture dump, the 8 real sites, options, errors."""
import shutil

import pytest

from cqa_search.exceptions import ArchiveError
from cqa_search.readers import ReadReport, read_questions
from cqa_search.readers.stackexchange import strip_html

SITES = {  # site: (questions, answers, accepted answers, duplicate links with both ends present)
    "ai.stackexchange.com": (604, 1004, 285, 7),
    "beer.stackexchange.com": (663, 1572, 410, 0),
    "bicycles.meta.stackexchange.com": (453, 971, 157, 9),
    "cardano.stackexchange.com": (1042, 1496, 459, 5),
    "cstheory.meta.stackexchange.com": (589, 1322, 206, 13),
    "french.meta.stackexchange.com": (274, 487, 86, 6),
    "matheducators.stackexchange.com": (397, 1507, 189, 0),
    "quantumcomputing.stackexchange.com": (612, 1060, 389, 11),
}


@pytest.fixture
def tinysite(fixtures):
    return fixtures / "stackexchange" / "tinysite"


def test_fixture_dump(tinysite):
    questions = list(read_questions(tinysite))
    assert [q.id for q in questions] == ["tinysite:1", "tinysite:5", "tinysite:9"]
    wheel, rub, tyre = questions
    assert wheel.title == "How do I true a wobbly wheel?"
    # Tags dropped, entities decoded, <br>/blocks as line breaks, code text kept, spaces collapsed.
    assert wheel.body == ("My rear wheel wobbles & rubs the brake pad.\nIt started after a crash.\n"
                          "spoke_tension < 100\nrim: aluminium\nspokes: 32")
    assert wheel.tags == ("wheels", "truing") and rub.tags == ("brakes", "disc-brakes")
    # Score descending, then Id: 3 (score 3), 2 and 4 (score 1); 4 is the accepted one.
    assert wheel.answers == ("Use a truing stand and a spoke key.", "Take it to a shop.",
                             "Loosen the spokes on the side it rubs, a quarter turn at a time.")
    assert wheel.best_answer == 2
    assert wheel.category == "tinysite"
    assert wheel.extra == {"score": 5, "creation_date": "2020-01-02T03:04:05.678"}
    # LinkTypeId=3 only, and only when both ends are questions of the dump.
    assert rub.duplicate_of == ("tinysite:1",) and wheel.duplicate_of == () and tyre.duplicate_of == ()
    # An answer that comes before its question in the file is still joined.
    assert tyre.answers == ("Pump them to the pressure printed on the sidewall.",)
    assert tyre.body == "" and tyre.best_answer is None and tyre.extra["score"] == -1


def test_posts_path_site_and_first_tag_options(tinysite):
    questions = list(read_questions(tinysite / "Posts.xml", category_from="first_tag", site="bikes"))
    assert [(q.id, q.category) for q in questions] == [
        ("bikes:1", "wheels"), ("bikes:5", "brakes"), ("bikes:9", "bikes")]
    assert questions[1].duplicate_of == ("bikes:1",)  # PostLinks.xml found beside Posts.xml


def test_bad_options(tinysite):
    with pytest.raises(ArchiveError, match=r"category_from must be one of \{'site', 'first_tag'\}; got 'tag'"):
        list(read_questions(tinysite, category_from="tag"))
    with pytest.raises(ArchiveError, match="site must be a non-empty string or None; got ''"):
        list(read_questions(tinysite, site=""))


def test_strip_html():
    assert strip_html("a&nbsp;&amp;&#x41;<b>b</b><br/>c<div>d</div>e") == "a &Ab\nc\nd\ne"
    assert strip_html("  plain\n\n  text  ") == "plain\ntext"


def test_duplicate_notices_are_dropped(fixtures):
    """The notice forms StackExchange put at the top of duplicates' bodies (shapes copied
    from the real dumps: 2011 ``<br />``, 2012 indented ``<br>``, the later "already has
    an answer here" blockquote with its list of originals) never reach the body."""
    questions = {q.id.split(":")[1]: q for q in read_questions(fixtures / "stackexchange" / "dupsite")}
    bodies = {k: q.body for k, q in questions.items()}
    assert bodies["1"] == "Note:\nMy tyres feel soft after a week."
    assert bodies["2"] == "How hard should I pump road tyres?"
    assert bodies["3"] == "Pressure keeps dropping."  # "Possible Duplicates:", two links
    assert bodies["4"] == "What PSI for a commuter bike?"  # "already has an answer here:"
    assert bodies["5"] == "Flat every morning."  # "already has answers here</strong>:"
    assert bodies["6"] == "Soft tyre again."  # header paragraph + list, no blockquote
    assert bodies["7"] == "Pump or not?"  # "Closed. This question is a duplicate of"
    for key in "1234567":
        assert "tyre pressure should I run" not in bodies[key] and questions[key].duplicate_of
    # Not notices: a real quote, a notice quoted lower down, the phrase inside a sentence.
    assert bodies["8"] == "Possible duplicates are closed by the community.\nWho closes them?"
    assert bodies["9"] == ("Someone wrote under my post:\nPossible Duplicate:\n"
                           "Which tyre pressure should I run?\nWhy was it closed?")
    assert bodies["10"] == "This question already has an answer here, I think, but it is old."


def test_duplicate_notice_forms_of_strip_html():
    notice = '<blockquote><p><strong>Possible Duplicate:</strong><br><a href="/q/1">T</a></p></blockquote>'
    assert strip_html(notice + "<p>x</p>") == "x"
    assert strip_html("\n\n" + notice + notice + "<p>x</p>") == "x"  # blank text, two notices
    assert strip_html(notice) == ""
    assert strip_html("<p>x</p>" + notice) == "x\nPossible Duplicate:\nT"  # not at the top


def test_real_sites(shared_data):
    totals = [0, 0, 0, 0]
    for site, expected in SITES.items():
        questions = list(read_questions(shared_data(f"stackexchange/{site}")))
        got = (len(questions), sum(len(q.answers) for q in questions),
               sum(q.best_answer is not None for q in questions),
               sum(len(q.duplicate_of) for q in questions))
        assert got == expected, site
        assert all(q.id.startswith(site + ":") and q.category == site for q in questions)
        totals = [t + g for t, g in zip(totals, got)]
    assert totals == [4634, 9419, 2181, 51]


def test_real_duplicates_carry_no_notice(shared_data):
    """12 of the 50 duplicate questions of the 8 dumps began with a "Possible Duplicate"
    notice naming their original; none is left."""
    sites = [shared_data(f"stackexchange/{site}") for site in SITES]
    questions = list(read_questions(sites))
    duplicates = [q for q in questions if q.duplicate_of]
    assert len(duplicates) == 50
    assert not any(q.body.lower().startswith(("possible duplicate", "this question already has"))
                   for q in questions)
    assert sum("Possible Duplicate:" in q.body for q in questions) == 0


def test_several_sites_together(shared_data):
    paths = [shared_data(f"stackexchange/{site}") for site in ("ai.stackexchange.com",
                                                                 "beer.stackexchange.com")]
    assert sum(1 for _ in read_questions(paths)) == 604 + 663


def _dump(tmp_path, rows: bytes):
    folder = tmp_path / "brokensite"
    folder.mkdir()
    (folder / "Posts.xml").write_bytes(b'<?xml version="1.0" encoding="utf-8"?>\n<posts>\n'
                                       + rows + b"\n</posts>\n")
    return folder


QUESTION = b'<row Id="1" PostTypeId="1" Score="0" Title="Fine" Body="&lt;p&gt;ok&lt;/p&gt;" />'


def test_question_without_title_is_invalid(tmp_path):
    folder = _dump(tmp_path, QUESTION + b'\n<row Id="2" PostTypeId="1" Score="0" Body="no title" />')
    with pytest.raises(ArchiveError, match=r"Posts\.xml:4: question Id=2 has no Title"):
        list(read_questions(folder))


def test_skip_invalid_counts(tmp_path):
    folder = _dump(tmp_path, QUESTION + b'\n<row Id="2" PostTypeId="1" Body="x" />\n'
                   b'<row Id="3" PostTypeId="2" ParentId="1" Score="high" Body="y" />')
    report = ReadReport(skip_invalid=True)
    (q,) = read_questions(folder, report=report)
    assert q.id == "brokensite:1" and q.answers == ()
    assert report.n_skipped == 2
    assert "Posts.xml:5: answer Id=3: Score is not an integer: 'high'" in report.errors[0]


def test_malformed_xml(tmp_path):
    folder = _dump(tmp_path, QUESTION + b'\n<row Id="2" PostTypeId="1" Title="x" Body="a < b" />')
    with pytest.raises(ArchiveError, match=r"Posts\.xml:4: malformed XML at column 46: "
                                           r"not well-formed \(invalid token\)"):
        list(read_questions(folder))


def test_non_utf8_bytes(tmp_path):
    folder = _dump(tmp_path, QUESTION.replace(b"Fine", b"Fin\xe9"))
    with pytest.raises(ArchiveError, match=r"Posts\.xml:3: not valid UTF-8 \(byte b'\\xe9'"):
        list(read_questions(folder))


def test_wrong_root_and_missing_posts(tmp_path, tinysite):
    folder = tmp_path / "links_as_posts"
    folder.mkdir()
    shutil.copy(tinysite / "PostLinks.xml", folder / "Posts.xml")
    with pytest.raises(ArchiveError, match=r"Posts\.xml:2: expected the root element to be <posts>; "
                                           r"found <postlinks>"):
        list(read_questions(folder))
    with pytest.raises(ArchiveError, match="has no Posts.xml"):
        list(read_questions(tmp_path, format="stackexchange"))


def test_odd_ids_and_orphan_answers(tmp_path, caplog):
    site = tmp_path / "odd.site"
    site.mkdir()
    (site / "Posts.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<posts>\n'
        '<row Id="²" PostTypeId="1" Title="Superscript id" Score="1" />\n'
        '<row Id="٣" PostTypeId="2" ParentId="²" Body="Arabic-Indic digit id" Score="1" />\n'
        '<row Id="4" PostTypeId="2" ParentId="²" Body="Plain id" Score="1" />\n'
        '<row Id="5" PostTypeId="2" ParentId="99" Body="No such question" Score="1" />\n'
        "</posts>\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="cqa_search.readers"):
        (q,) = read_questions(site)
    assert q.id == "odd.site:²" and q.answers == ("Plain id", "Arabic-Indic digit id")
    (record,) = caplog.records
    assert "1 answer(s) belong to no question of the dump" in record.getMessage()
