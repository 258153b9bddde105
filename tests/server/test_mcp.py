"""``cqa-search mcp``: the MCP server's tools through the official SDK's own client,
connected in-process (no network, no subprocess)."""
import asyncio
import builtins
import json

import pytest

from cqa_search import SearchEngine

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")
from cqa_search.server.mcp_server import create_mcp_server  # noqa: E402


def calls(index, *requests):
    """``(is_error, JSON or text)`` of each ``(tool, arguments)``, and the tools listed."""
    server, live = create_mcp_server(index)

    async def session():
        async with mcp.Client(server) as client:
            tools = (await client.list_tools()).tools
            out = []
            for name, arguments in requests:
                result = await client.call_tool(name, arguments)
                text = result.content[0].text
                out.append((result.is_error, text if result.is_error else json.loads(text)))
            return tools, out

    return asyncio.run(session())


def test_tools_give_what_the_engine_gives(ranked_index):
    engine = SearchEngine.open(ranked_index)
    tools, out = calls(ranked_index,
                       ("search", {"query": "renew my visa", "k": 3}),
                       ("search", {"query": "visa", "category": "visas", "after": "2000"}),
                       ("similar", {"question_id": "t01", "k": 2}),
                       ("get_question", {"question_id": "t01"}),
                       ("similar", {"question_id": "t01", "after": "2000"}))
    assert {t.name for t in tools} == {"search", "similar", "get_question"}
    described = {t.name: t.description for t in tools}
    assert "query syntax" in described["search"] and "left out" in described["similar"]
    (error, found), (_, dated), (_, like), (_, question), (_, dated_like) = out
    assert not error
    assert [h["id"] for h in found["hits"]] == list(engine.search("renew my visa", k=3).doc_ids)
    hit = found["hits"][0]
    assert set(hit) == {"rank", "id", "score", "title", "category", "tags", "date", "url",
                        "n_answers", "snippet", "answer"} and hit["answer"]["label"] == "best answer"
    assert dated["hits"] == [] and dated["category"] == "Visas"  # the toy archive has no dates
    assert dated["filters"] == ["category:Visas", "date:>=2000-01-01"]
    assert found["filters"] == found["notices"] == []
    assert [h["id"] for h in like["hits"]] == list(engine.similar("t01", 2).doc_ids)
    assert like["like"] == "t01" and "t01" not in [h["id"] for h in like["hits"]]
    assert question["id"] == "t01" and len(question["answers"]) == 2
    assert question["generation"] == engine.generation
    assert dated_like["hits"] == [] and dated_like["filters"] == ["date:>=2000-01-01"]


@pytest.mark.parametrize("name,arguments,message", [
    ("search", {"query": "visa", "k": 0}, "k must be between 1 and 100; got 0"),
    ("search", {"query": "   "}, "empty query"),
    ("search", {"query": "visa", "category": "Nope"}, "unknown category 'Nope'"),
    ("search", {"query": "visa", "after": "2014-13"}, "bad date filter"),
    ("similar", {"question_id": "nope"}, "unknown question id 'nope'"),
    ("similar", {"question_id": "t01", "before": "2014-13"}, "bad date filter"),
    ("get_question", {"question_id": "nope"}, "no question 'nope' in the archive"),
    ("get_question", {"question_id": "T01"}, "no question 'T01' in the archive; did you mean "
                                             "'t01'?"),
    ("similar", {"question_id": "T01"}, "unknown question id 'T01'; did you mean 't01'?"),
    ("similar", {"question_id": "t01", "tags": [""]}, "tags has an empty tag name"),
])
def test_input_errors_are_tool_errors(toy_index, name, arguments, message):
    _, [(error, text)] = calls(toy_index, (name, arguments))
    assert error and message in text


def test_similar_takes_every_filter_and_hits_have_dates(tmp_path):
    from cqa_search import Question, build_index

    build_index([Question("a", "renew visa", tags=("visa",), extra={"date": "2013-05-01"}),
                 Question("b", "visa fees renew", tags=("visa", "fees"),
                          extra={"date": "2014-05-01"}),
                 Question("c", "visa renew office", tags=("office",))], tmp_path / "idx")
    _, out = calls(tmp_path / "idx", ("similar", {"question_id": "a", "tags": ["office"]}),
                   ("similar", {"question_id": "a", "not_tags": ["office"]}),
                   ("search", {"query": "visa", "tags": ["visa"], "before": "2014"}))
    assert [(h["id"], h["date"]) for h in out[0][1]["hits"]] == [("c", None)]
    assert [(h["id"], h["date"]) for h in out[1][1]["hits"]] == [("b", "2014-05-01")]
    assert [(h["id"], h["date"]) for h in out[2][1]["hits"]] == [("a", "2013-05-01")]


def test_no_index_yet_is_a_tool_error(tmp_path):
    _, [(error, text)] = calls(tmp_path / "nothing", ("search", {"query": "visa"}))
    assert error and "no index at" in text


def test_without_the_mcp_extra(capsys, toy_index, monkeypatch):
    from cqa_search.cli.__main__ import main

    real_import = builtins.__import__

    def no_mcp(name, *args, **kwargs):
        if name == "mcp":
            raise ImportError("No module named 'mcp'", name="mcp")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mcp)
    assert main(["mcp", str(toy_index)]) == 1
    assert capsys.readouterr().err.strip() == (
        "cqa-search: error: mcp needs the mcp extra (the mcp package is not installed): "
        "pip install 'cqa-search[mcp]'")


def test_the_command_over_stdio(toy_index):
    """`cqa-search mcp INDEX` as an assistant starts it: nothing but the protocol on its
    standard output."""
    import sys

    params = mcp.StdioServerParameters(command=sys.executable,
                                       args=["-m", "cqa_search", "mcp", str(toy_index)])

    async def session():
        async with mcp.Client(params) as client:
            result = await client.call_tool("search", {"query": "renew visa", "k": 1})
            return json.loads(result.content[0].text)

    assert [h["id"] for h in asyncio.run(session())["hits"]] == \
        list(SearchEngine.open(toy_index).search("renew visa", k=1).doc_ids)


def test_sigint_after_the_handshake_ends_the_server(toy_index):
    """Issue 43: after the handshake SIGINT left the process alive and silent until its
    standard input closed (the SDK reads it in a thread that asyncio's cancellation waits
    for); now it ends at once, as the command line ends on Ctrl-C."""
    import signal

    from cqa_search.testing.inputs import MCPSession

    session = MCPSession(toy_index)
    try:
        session.handshake()
        error, text = session.tool("search", {"query": "renew visa", "k": 1})
        assert error is False and json.loads(text)["hits"]
        took, code, err = session.stop(signal.SIGINT)
    finally:
        if session.proc.poll() is None:
            session.proc.kill()
    assert took is not None and took < 10
    assert (code, err) == (130, "cqa-search: interrupted\n")


def test_structured_content_with_output_schemas_and_compact_text(toy_index):
    """Issue 40: the results were pretty-printed text only, and serverInfo had no version."""
    from cqa_search import __version__
    from cqa_search.server import schema

    server, _ = create_mcp_server(toy_index)

    async def session():
        async with mcp.Client(server) as client:
            tools = (await client.list_tools()).tools
            results = [await client.call_tool("search", {"query": "renew visa", "k": 10}),
                       await client.call_tool("similar", {"question_id": "t01", "k": 3}),
                       await client.call_tool("get_question", {"question_id": "t01"})]
            return client.server_info, tools, results

    info, tools, results = asyncio.run(session())
    assert info.version == __version__
    schemas = {t.name: t.output_schema for t in tools}
    assert schemas["search"] == schemas["similar"] == schema.CompactResults.model_json_schema()
    assert schemas["get_question"]["required"][:2] == ["id", "title"]
    for result in results:
        text = result.content[0].text
        assert json.loads(text) == result.structured_content and "\n" not in text
    found = schema.CompactResults.model_validate(results[0].structured_content)
    assert found.query == "renew visa" and found.hits and found.hits[0].date is None
    assert results[2].structured_content["id"] == "t01"


def test_requests_in_flight_are_answered_when_stdin_closes(toy_index):
    """Issue 40: the SDK's loop cancelled the requests it had read when standard input
    closed; now each is answered, then the server ends."""
    import subprocess
    import sys

    messages = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    messages += [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
        "name": "search", "arguments": {"query": f"visa renew {i}", "k": 5}}}
        for i in range(1, 7)]
    done = subprocess.run([sys.executable, "-m", "cqa_search", "mcp", str(toy_index)],
                          input="".join(json.dumps(m) + "\n" for m in messages),
                          capture_output=True, text=True, timeout=120)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0 and done.stderr == ""
    assert sorted(a["id"] for a in answers) == list(range(7))
    assert all(a["result"]["structuredContent"]["hits"] for a in answers if a["id"])


@pytest.mark.parametrize("arguments,message", [
    ({"query": "visa date:>9999"}, "bad date filter 'date:>9999': no question is dated after "
                                   "9999-12-31"),
    ({"query": "visa", "after": "9999-12-31", "before": "0001"},
     "bad date filter 'date:<0001': no question is dated before 0001-01-01"),
])
def test_dates_past_the_calendar_are_tool_errors(toy_index, arguments, message):
    """They were 'unexpected exceptions' (an OverflowError, a TypeError)."""
    _, [(error, text)] = calls(toy_index, ("search", arguments))
    assert error and message in text


def test_dates_at_the_end_of_the_calendar_search(toy_index):
    _, found = calls(toy_index, ("search", {"query": "visa date:9999-12-31"}),
                     ("search", {"query": "visa", "after": "9999-12", "before": "9999-12-31"}))
    assert [error for error, _ in found] == [False, False]
    assert [doc["filters"] for _, doc in found] == [
        ["date:9999-12-31..9999-12-31"], ["date:>=9999-12-01", "date:<9999-12-31"]]
