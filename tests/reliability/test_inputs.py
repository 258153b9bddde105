"""Issue 43: hostile input through every face (the command line, the server with its
write API, MCP over stdio): dates no int64 holds and filters at the ends of the calendar,
closed standard streams, archived terminal control sequences, token files that are no
files, SIGINT to MCP, request bodies that stall or are cut, more-like-this of a large
question, forged rankers exported.

Small N here (CI); ``scripts/reliability.py`` runs every case (the figures of
BENCHMARKS.md). The loops live in cqa_search/testing/inputs.py and forgery.py.
"""
import pytest

from cqa_search.testing import forgery, harness, inputs

pytestmark = pytest.mark.reliability


def _failures(results):
    return [r for r in results if not r["ok"]]


@pytest.fixture(scope="module")
def edge(demo_index, tmp_path_factory):
    """The demo index with a question of 0001-01-01 and one of 9999-12-31."""
    return inputs.edge_index(demo_index, tmp_path_factory.mktemp("edge"))


def test_dates_no_int64_holds_are_refused_by_their_record(demo_index, tmp_path):
    """1e30 from an archive (it broke every tag: and date: filter of the index), a digit
    that is not ASCII (it crashed int()); the script runs every value."""
    results = inputs.date_archives(demo_index, tmp_path, values=[1e30, "²"])
    assert len(results) == 8
    assert _failures(results) == []


def test_filters_at_the_ends_of_the_calendar(edge):
    """date:9999-12-31 (an overflow), date:>9999 (a TypeError), --before 9999-12-31 ... on
    the command line: the questions they keep, or one line; every fourth one here."""
    results = inputs.calendar_filters(edge, inputs.CALENDAR_FILTERS[::4])
    assert _failures(results) == []


def test_mcp_tool_calls_and_signals(edge):
    """The filters as tool calls over stdio, then SIGINT after the handshake (the process
    stayed until stdin closed) and SIGTERM."""
    pytest.importorskip("mcp", reason="needs the mcp extra")
    results = inputs.mcp_session(edge, inputs.CALENDAR_FILTERS[1::4])
    assert len([r for r in results if r["case"].startswith("mcp: ")]) == 3
    assert _failures(results) == []


def test_a_server_taking_writes(edge, tmp_path):
    """Bad dates posted (then /api/tags and filters: they answered 500 for every user),
    the filters over HTTP, write bodies that stall (held 50 s and more) or are cut (a
    traceback each in the log), more-like-this of a question of a megabyte."""
    pytest.importorskip("fastapi", reason="needs the server extra")
    results = inputs.write_server(edge, tmp_path, n_bodies=3, megabytes=1,
                                  filters=inputs.CALENDAR_FILTERS[2::5])
    assert _failures(results) == []


def test_closed_standard_streams(demo_index, tmp_path):
    """>&-, 2>&-, <&- (exit 70, the message on stdout with 2>&-); the script runs
    query, --json, info, export-ranker and build-index too."""
    results = inputs.closed_streams(demo_index, tmp_path,
                                    labels=("query, a refused filter", "piped queries"))
    assert len(results) == 6
    assert _failures(results) == []


def test_control_characters_never_reach_the_terminal(tmp_path):
    results = inputs.control_characters(tmp_path)
    assert len(results) == 9
    assert _failures(results) == []


def test_token_files_that_are_no_files(demo_index, tmp_path):
    """/dev/zero was read without end, a FIFO waited for ever, a non-ASCII token never
    matched (the script runs a directory, a large file, ... too)."""
    results = inputs.token_files(demo_index, tmp_path, labels=(
        "/dev/zero", "a FIFO", "a link to /dev/zero", "a non-ASCII token"))
    assert len(results) == 4
    assert _failures(results) == []


def test_forged_rankers_are_refused_or_exported_finite(demo_index, tmp_path):
    """An infinite weight was exit 70, one overflowing once folded wrote Infinity (not
    JSON); a sample of the ranker's forgeries (the script exports them all)."""
    copy = harness.fresh_copy(demo_index, tmp_path / "copy")
    cases = forgery.ranker_cases(copy)[::6]
    result = forgery.run_exports(copy, cases)
    assert "crashed" not in result, result
    assert result["unexpected"] == [], result["unexpected"][:3]
    assert result["outcomes"]["refused"] > 0 and result["outcomes"]["written"] > 0
