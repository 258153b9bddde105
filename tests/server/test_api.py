"""The JSON API through the framework's test client: same results as the Python API, the
documented schema, errors and limits, and an index rebuilt while the server runs."""
import errno
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from cqa_search import Question, SearchEngine, build_index
from cqa_search.exceptions import QueryError
from cqa_search.index.store import CURRENT, current_generation
from cqa_search.presentation import Presenter
from cqa_search.query_parser import MAX_QUERY_CHARS
from cqa_search.server import create_app
from cqa_search.server import schema
from cqa_search.server.app import MAX_K, MAX_TARGET_BYTES, READ_ONLY

QUERIES = [("renew my visa", None), ("category:cars engine battery", None),
           ('"second hand" sofa', None), ("+visa -family office", None),
           ("title:visa renewal", None), ("cheap furniture", "shopping"),
           ("car", "Cars"), ("how do I transfer my car", None), ("furnture sofa", None)]


def wait_for(condition, what, timeout=30.0):
    """Poll ``condition()`` until true (a bounded wait for an event, not a timing check)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def client(toy_index):
    with TestClient(create_app(toy_index)) as c:
        yield c


@pytest.fixture(scope="module")
def ranked_client(ranked_index):
    with TestClient(create_app(ranked_index)) as c:
        yield c


@pytest.mark.parametrize("q,category", QUERIES)
@pytest.mark.parametrize("ranked", [False, True])
def test_same_results_as_the_python_api(q, category, ranked, toy_index, ranked_index, client,
                                        ranked_client):
    index, http = (ranked_index, ranked_client) if ranked else (toy_index, client)
    engine = SearchEngine.open(index)
    expected = engine.search(q, k=5, category=category)
    params = {"q": q, "k": 5, "explain": "true", **({"category": category} if category else {})}
    response = http.get("/api/search", params=params)
    assert response.status_code == 200, response.text
    doc = response.json()
    assert [h["id"] for h in doc["hits"]] == list(expected.doc_ids)
    assert [h["score"] for h in doc["hits"]] == expected.scores.tolist()
    # the whole document is the presenter's (the CLI's --json), plus the generation
    same = Presenter(engine).results_dict(expected, typed=q, explain=True)
    assert doc == {**same, "generation": engine.generation}
    assert (doc["ranking"]["ranker"] is not None) == ranked
    assert all(("contributions" in h) == ranked for h in doc["hits"])


def test_responses_follow_the_documented_schema(ranked_client):
    docs = [(schema.SearchResults, ranked_client.get("/api/search", params={
                "q": "renew visa furnture", "explain": "true"})),
            (schema.SearchResults, ranked_client.get("/api/search", params={"q": "zzzz"})),
            (schema.Question, ranked_client.get("/api/questions/t04")),
            (schema.Categories, ranked_client.get("/api/categories")),
            (schema.Health, ranked_client.get("/health")),
            (schema.Completions, ranked_client.get("/api/complete", params={"q": "visa"})),
            (schema.Error, ranked_client.get("/api/search"))]
    for model, response in docs:
        model.model_validate(response.json(), strict=True)
    hits = docs[0][1].json()["hits"]
    assert hits and all(sum(h["contributions"].values()) == pytest.approx(h["score"])
                        for h in hits)  # the ranker's intercept is 0 here


def test_openapi_schema_lists_the_api(client):
    doc = client.get("/openapi.json").json()
    assert {"/api/search", "/api/questions/{doc_id}", "/api/categories", "/api/complete",
            "/health"} <= set(doc["paths"])
    assert {"SearchResults", "Hit", "Error"} <= set(doc["components"]["schemas"])
    params = {p["name"]: p for p in doc["paths"]["/api/search"]["get"]["parameters"]}
    assert params["k"]["schema"]["maximum"] == MAX_K
    q = params["q"]["schema"]  # optional: a question may come as title and body instead
    assert {"string", "null"} == {s["type"] for s in q["anyOf"]}
    assert next(s for s in q["anyOf"] if s["type"] == "string")["maxLength"] == MAX_QUERY_CHARS
    assert {"title", "body"} <= set(params)
    assert client.get("/docs").status_code == 404  # no page that loads scripts from a CDN


def test_question_with_all_its_answers(client, toy_questions):
    doc = client.get("/api/questions/t04").json()
    t04 = next(q for q in toy_questions if q.id == "t04")
    assert doc["answers"] == list(t04.answers) and doc["best_answer"] == 1
    assert doc["title"] == t04.title and doc["url"] is None and doc["generation"]


def test_question_ids_with_colons_and_slashes_and_source_links(tmp_path):
    path = tmp_path / "idx"
    build_index([Question("ai.stackexchange.com:42", "What is a transformer?", category="ai"),
                 Question("forum/7", "A thread id with a slash")], path)
    with TestClient(create_app(path)) as http:
        doc = http.get("/api/questions/ai.stackexchange.com:42").json()
        assert doc["url"] == "https://ai.stackexchange.com/q/42"
        assert http.get("/api/questions/forum/7").json()["title"] == "A thread id with a slash"
        hit = http.get("/api/search", params={"q": "transformer"}).json()["hits"][0]
        assert hit["url"] == "https://ai.stackexchange.com/q/42"


def test_categories_with_counts(client, toy_index):
    doc = client.get("/api/categories").json()
    engine = SearchEngine.open(toy_index)
    counts = dict(zip(engine.categories, engine.categories.counts().tolist()))
    assert {c["name"]: c["count"] for c in doc["categories"]} == counts
    assert [c["count"] for c in doc["categories"]] == sorted(counts.values(), reverse=True)
    assert doc["n_docs"] == engine.n_docs == 12


def test_counts_leave_deleted_and_replaced_questions_out(tmp_path):
    from cqa_search.index.live import add_questions, delete_questions

    path = tmp_path / "idx"
    build_index([Question("a", "renew visa", category="Visas"),
                 Question("b", "visa fees", category="Visas"),
                 Question("c", "cheap sofa", category="Shopping")], path)
    add_questions(path, [Question("a", "renew my visa", category="Visas")], replace=True)
    delete_questions(path, ["c"])
    engine = SearchEngine.open(path)
    assert engine.n_docs == 4 and engine.n_questions == 2
    assert engine.category_counts() == {"Visas": 2}
    with TestClient(create_app(path)) as http:
        doc = http.get("/api/categories").json()
        assert doc["n_docs"] == 2 and doc["categories"] == [{"name": "Visas", "count": 2}]
        assert http.get("/health").json()["n_docs"] == 2
        # Shopping lost its last question: one answer everywhere, it is gone
        refused = http.get("/api/search", params={"q": "sofa", "category": "shopping"})
        assert refused.status_code == 400
        assert refused.json()["detail"] == ("unknown category 'shopping': its questions were "
                                            "all deleted")
        assert http.get("/api/search", params={"q": "category:Shopping sofa"}).status_code == 400
    with pytest.raises(QueryError, match="unknown category 'Shopping': its questions were all"):
        engine.search("sofa", category="Shopping")
    assert engine.categories.present() == ["Visas"]
    from cqa_search.index.live import index_info

    assert index_info(path)["categories"] == 1


def test_health(client, toy_index):
    assert client.get("/health").json() == {
        "status": "ok", "generation": current_generation(toy_index), "n_docs": 12,
        "error": None, "version": client.app.version}


@pytest.mark.parametrize("method,url,params,status,detail", [
    ("GET", "/api/search", {}, 400, r"^give the question: q, or its title and body"),
    ("GET", "/api/search", {"q": ""}, 400, r"^q: String should have at least 1 character"),
    ("GET", "/api/search", {"q": "   "}, 400, r"empty query"),
    ("GET", "/api/search", {"q": "-visa"}, 400, r"empty query"),
    ("GET", "/api/search", {"q": "visa", "k": 0}, 400, r"^k: Input should be greater than"),
    ("GET", "/api/search", {"q": "visa", "k": MAX_K + 1}, 400, r"^k: .*less than or equal to 100"),
    ("GET", "/api/search", {"q": "visa", "k": "ten"}, 400, r"^k: Input should be a valid integer"),
    ("GET", "/api/search", {"q": "visa", "explain": "maybe"}, 400, r"^explain: "),
    ("GET", "/api/search", {"q": "visa", "category": "Visaz"}, 400,
     r"unknown category 'Visaz'.*did you mean 'Visas'"),
    ("GET", "/api/search", {"q": "category:Nope visa"}, 400, r"unknown category 'Nope'"),
    ("GET", "/api/search", {"q": "visa", "category": "x" * 501}, 400, r"^category: "),
    ("GET", "/api/search", {"q": "v" * (MAX_QUERY_CHARS + 1)}, 400,
     r"^q: String should have at most 10000 characters"),
    ("GET", "/api/questions/nope", {}, 404, r"^no question 'nope' in the archive$"),
    ("GET", "/nowhere", {}, 404, r"^Not Found$"),
    ("POST", "/api/search", {"q": "visa"}, 405, r"^Method Not Allowed$"),
    ("DELETE", "/api/questions/t01", {}, 405, r"^this API is read-only; `cqa-search serve "
     r"--allow-writes` takes POST /api/questions and DELETE /api/questions/ID"),
])
def test_errors_are_json_with_a_fitting_status(client, method, url, params, status, detail):
    response = client.request(method, url, params=params)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"status", "error", "detail"} and body["status"] == status
    assert re.search(detail, body["detail"]), body
    assert "Traceback" not in response.text


@pytest.mark.parametrize("url", ["/", "/health", "/api/search?q=visa", "/api/categories",
                                 "/api/questions/t01", "/nowhere"])
def test_head_is_get_without_the_body(client, url):
    get, head = client.get(url), client.head(url)
    assert head.status_code == get.status_code and head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]
    assert head.headers["content-length"] == str(len(get.content))
    assert head.headers["x-content-type-options"] == "nosniff"


def test_limits_on_request_size(client):
    longest = ("visa " * (MAX_QUERY_CHARS // 5))[:MAX_QUERY_CHARS]
    assert client.get("/api/search", params={"q": longest}).status_code == 200
    # a body is refused before anything reads it
    response = client.request("GET", "/api/search", params={"q": "visa"}, content=b"x" * 1000)
    assert response.status_code == 413 and "read-only" in response.json()["detail"]
    response = client.get("/api/search?q=" + "a" * MAX_TARGET_BYTES)
    assert response.status_code == 414 and response.json()["status"] == 414
    # the longest query fits in the target limit, percent-encoded, for two-byte letters
    response = client.get("/api/search", params={"q": "é" * MAX_QUERY_CHARS})
    assert response.status_code == 200 and response.json()["hits"] == []


def test_a_bug_is_a_500_without_details(toy_index, monkeypatch):
    def broken(self, *args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(Presenter, "results_dict", broken)
    with TestClient(create_app(toy_index), raise_server_exceptions=False) as http:
        response = http.get("/api/search", params={"q": "visa"})
    assert response.status_code == 500
    assert response.json() == {"status": 500, "error": "Internal Server Error",
                               "detail": "internal error (logged by the server)"}


def test_security_headers_and_the_page(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'role="search"' in page.text and '<label for="q"' in page.text
    for response in (page, client.get("/api/search", params={"q": "visa"}),
                     client.get("/static/app.js"), client.get("/nowhere")):
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["x-content-type-options"] == "nosniff"
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/static/style.css").status_code == 200


def test_no_index_yet_is_503_then_served_without_a_restart(tmp_path, toy_questions):
    path = tmp_path / "later"
    with TestClient(create_app(path)) as http:
        for url in ("/api/search?q=visa", "/api/categories", "/health", "/api/questions/t01"):
            response = http.get(url)
            assert response.status_code == 503, url
            assert response.json()["detail"].startswith("no index to search: no index at ")
            assert response.headers["retry-after"]
        assert http.get("/").status_code == 200
        build_index(toy_questions, path)
        assert http.get("/api/search", params={"q": "visa"}).json()["hits"]


def test_verify_refuses_a_damaged_index_that_still_reads(tmp_path, toy_questions):
    """A changed byte that leaves the index readable (a title in the document store) is
    served without --verify and refused with it (503, "corrupted"), never a traceback."""
    path = tmp_path / "idx"
    build_index(toy_questions, path)
    store = next(path.glob("gen-*/segments/*/archive.jsonl"))
    data = store.read_bytes()
    store.write_bytes(data.replace(b"visa", b"vIsa", 1))
    with TestClient(create_app(path)) as http:
        assert http.get("/api/search", params={"q": "sofa"}).status_code == 200
    with TestClient(create_app(path, verify=True)) as http:
        response = http.get("/api/search", params={"q": "sofa"})
        assert response.status_code == 503 and "corrupted" in response.json()["detail"]


def test_concurrent_requests_give_the_sequential_results(ranked_client, ranked_index):
    engine = SearchEngine.open(ranked_index)
    queries = [q for q, c in QUERIES if c is None] * 6
    expected = [list(engine.search(q).doc_ids) for q in queries]

    def ask(q):
        return [h["id"] for h in ranked_client.get("/api/search", params={"q": q}).json()["hits"]]

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(ask, queries)) == expected


def test_rebuild_refit_and_breakage_while_serving_fail_no_request(tmp_path, toy_questions,
                                                                 extra_question, train_ranker):
    path = tmp_path / "idx"
    build_index(toy_questions, path)
    answers, stop = [], threading.Event()
    with TestClient(create_app(path, interval=0.02)) as http:
        def generation():
            return http.get("/health").json()["generation"]

        def hammer():
            while not stop.is_set():
                r = http.get("/api/search", params={"q": "zebra visa office", "k": 3})
                answers.append((r.status_code, r.json()))

        threads = [threading.Thread(target=hammer) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            wait_for(lambda: len(answers) >= 5, "the first answers")
            first = generation()
            for _ in range(3):  # the first generations are deleted meanwhile
                build_index(toy_questions + [extra_question], path)
            rebuilt = current_generation(path)
            wait_for(lambda: generation() == rebuilt, "the rebuilt index")
            n = len(answers)
            wait_for(lambda: len(answers) > n + 3, "answers from the rebuilt index")
            assert answers[-1][1]["hits"][0]["id"] == "z1"

            train_ranker(path)  # a refit: a new generation with a ranker, same archive
            refit = current_generation(path)
            wait_for(lambda: generation() == refit, "the refitted index")
            n = len(answers)
            wait_for(lambda: len(answers) > n + 3, "answers from the refitted index")
            assert answers[-1][1]["ranking"]["ranker"]["learner"] == "ranksvm"

            (path / CURRENT).write_text("garbage\n")  # the index breaks: keep serving
            wait_for(lambda: http.get("/health").json()["status"] == "stale", "the breakage")
            health = http.get("/health").json()
            assert health["generation"] == refit and "corrupted index" in health["error"]
            n = len(answers)
            wait_for(lambda: len(answers) > n + 3, "answers from the broken index")
            (path / CURRENT).write_text(refit + "\n")
            wait_for(lambda: http.get("/health").json()["status"] == "ok", "the repair")
        finally:
            stop.set()
            for t in threads:
                t.join()
    statuses = {status for status, _ in answers}
    assert statuses == {200}, [doc for status, doc in answers if status != 200][:3]
    served = {doc["generation"] for _, doc in answers}
    assert {first, rebuilt, refit} <= served


def test_similar_questions(ranked_client, ranked_index):
    engine = SearchEngine.open(ranked_index)
    doc = ranked_client.get("/api/questions/t01/similar", params={"k": 3, "explain": True}).json()
    schema.SearchResults.model_validate(doc)
    expected = engine.similar("t01", 3)
    assert [h["id"] for h in doc["hits"]] == list(expected.doc_ids) and "t01" not in expected
    assert [h["score"] for h in doc["hits"]] == pytest.approx(expected.scores.tolist())
    assert doc["hits"][0]["contributions"]  # the ranker's, as for a search
    missing = ranked_client.get("/api/questions/nope/similar")
    assert missing.status_code == 404 and missing.json()["detail"] == "no question 'nope' in the archive"
    assert ranked_client.get("/api/questions/t01/similar", params={"k": 0}).status_code == 400
    assert ranked_client.get("/api/questions/t01").json()["id"] == "t01"  # still the question


def test_title_completions(client):
    """Issue 40: the titles that begin with the words typed, as the engine's complete; the
    server reads the titles before it serves a generation (not at the first keystroke)."""
    engine, _ = client.app.state.live.current()
    assert "titles" in engine.searcher.data.cache
    doc = client.get("/api/complete", params={"q": "How do I re", "k": 3}).json()
    assert doc["query"] == "How do I re" and doc["completions"] == [
        {"id": "t01", "title": "How do I renew my residence visa?", "answers": 2}]
    assert [c["id"] for c in client.get("/api/complete", params={"q": "visa"}).json()[
        "completions"]] == ["t02", "t11"]
    assert client.get("/api/complete", params={"q": "category:cars"}).json()[
        "completions"] == []  # plain words, never query syntax
    for params, message in (({}, "q: Field required"), ({"q": "visa", "k": 0}, "k: "),
                            ({"q": "visa", "category": "Visas"}, "unknown parameter 'category'"),
                            ({"q": "v" * (MAX_QUERY_CHARS + 1)}, "q: ")):
        response = client.get("/api/complete", params=params)
        assert response.status_code == 400 and message in response.json()["detail"], params


def test_tag_facet_and_date_filters(tmp_path):
    path = tmp_path / "idx"
    build_index([Question("a", "renew visa", tags=("visa", "renewal"), extra={"date": "2013-05-01"}),
                 Question("b", "visa fees", tags=("visa",), extra={"date": "2014-05-01"}),
                 Question("c", "cheap sofa", tags=("furniture",))], path)
    with TestClient(create_app(path)) as http:
        doc = http.get("/api/tags").json()
        schema.Tags.model_validate(doc)
        assert doc["tags"] == [{"name": "visa", "count": 2}, {"name": "furniture", "count": 1},
                               {"name": "renewal", "count": 1}] and doc["n_tags"] == 3
        assert http.get("/api/tags", params={"limit": 1}).json()["tags"] == [
            {"name": "visa", "count": 2}]

        def ids(**params):
            response = http.get("/api/search", params=params)
            assert response.status_code == 200, response.json()
            return {h["id"] for h in response.json()["hits"]}

        assert ids(q="visa tag:renewal") == {"a"}
        assert ids(q="visa", after="2014") == {"b"}
        assert ids(q="visa", before="2014-01-01") == {"a"}
        assert ids(q="visa date:2013") == {"a"}
        assert ids(q="visa", after="2013", before="2015") == {"a", "b"}
        bad = http.get("/api/search", params={"q": "visa", "after": "2014-13"})
        assert bad.status_code == 400 and bad.json()["detail"] == (
            "bad date filter 'date:>=2014-13': month must be in 1..12")
        assert http.get("/api/search", params={"q": "visa date:soon"}).status_code == 400
        # more like this takes the same filters
        like = http.get("/api/questions/a/similar", params={"after": "2014"}).json()
        assert [h["id"] for h in like["hits"]] == ["b"] and like["filters"] == [
            "date:>=2014-01-01"]
        bad = http.get("/api/questions/a/similar", params={"before": "2014-13"})
        assert bad.status_code == 400 and "bad date filter" in bad.json()["detail"]


def test_hits_show_their_dates_and_more_like_this_takes_every_filter(tmp_path):
    path = tmp_path / "idx"
    build_index([Question("se:1", "renew visa", tags=("visa", "renewal"),
                          extra={"creation_date": "2013-05-01T10:20:30"}),
                 Question("se:2", "visa fees renew", tags=("visa",), extra={"date": "2014-05-01"}),
                 Question("se:3", "visa renew office", tags=("visa", "office")),
                 Question("se:4", "cheap sofa", tags=("furniture",))], path)
    with TestClient(create_app(path)) as http:
        def hits(url, **params):
            response = http.get(url, params=params)
            assert response.status_code == 200, response.json()
            schema.SearchResults.model_validate(response.json())
            return {h["id"]: h["date"] for h in response.json()["hits"]}

        assert hits("/api/search", q="visa") == {
            "se:1": "2013-05-01T10:20:30Z", "se:2": "2014-05-01", "se:3": None}
        similar = "/api/questions/se:1/similar"
        assert hits(similar) == {"se:2": "2014-05-01", "se:3": None}
        assert hits(similar, tag="office") == {"se:3": None}
        assert hits(similar, not_tag="office") == {"se:2": "2014-05-01"}
        assert hits(similar, after="2014") == {"se:2": "2014-05-01"}
        assert hits("/api/search", q="visa", tag=["visa", "renewal"]) == {
            "se:1": "2013-05-01T10:20:30Z"}
        # a parameter the endpoint does not take is refused, never ignored
        for url, params in [(similar, {"tags": "office"}), ("/api/search", {"q": "visa",
                                                                           "after_": "2014"})]:
            refused = http.get(url, params=params)
            assert refused.status_code == 400, refused.json()
            assert re.match(r"unknown parameter '(tags|after_)'; this endpoint takes: "
                            r"after, before, (body, )?category, explain, k, not_tag, ",
                            refused.json()["detail"])
        assert http.get("/", params={"q": "visa"}).status_code == 200  # the page's own state
        missing = http.get("/api/questions/1/similar")
        assert missing.status_code == 404 and missing.json()["detail"] == (
            "no question '1' in the archive; did you mean 'se:1'?")
        assert http.get("/api/questions/SE:4").json()["detail"] == (
            "no question 'SE:4' in the archive; did you mean 'se:4'?")


def test_the_filters_applied_and_the_notices_come_with_the_hits(client):
    """How the query was read is in the response: the filters applied (the after and
    category parameters included), and what was not read as syntax."""
    doc = client.get("/api/search", params={"q": "visa -family tag:", "after": "2014",
                                            "category": "visas"}).json()
    schema.SearchResults.model_validate(doc, strict=True)
    assert doc["filters"] == ["-family", "category:Visas", "date:>=2014-01-01"]
    assert doc["notices"] == ["'tag:' has no value right after its colon: left out (write "
                              "e.g. tag:machine-learning)"]
    pasted = client.get("/api/search", params={"q": "I can NOT renew my visa"}).json()
    assert pasted["filters"] == [] and pasted["hits"]
    assert pasted["notices"][0].startswith("NOT was searched as a word")


TOKEN = "0123456789abcdef-test-token"


def test_writes_need_the_token_and_are_served_at_once(tmp_path, toy_questions):
    from cqa_search.server.writes import parse_questions

    path = tmp_path / "idx"
    build_index(toy_questions, path)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(path)) as http:  # read-only by default
        # a write is refused by its method, whether it has a body or not (it was a 413
        # with a body, and a redirect to /api/questions/ without one)
        for refused in [http.post("/api/questions", json=[{"id": "n1", "title": "kayak"}]),
                        http.post("/api/questions", follow_redirects=False),
                        http.put("/api/questions/t01", json={"id": "t01"}),
                        http.delete("/api/questions/t01", headers=auth)]:
            assert refused.status_code == 405 and refused.json()["detail"] == READ_ONLY
            assert refused.headers["allow"] == "GET, HEAD"
        assert "/api/questions" not in http.get("/openapi.json").json()["paths"]
    with TestClient(create_app(path, write_token=TOKEN)) as http:
        for headers, status in [({}, 401), ({"Authorization": "Bearer wrong"}, 403),
                                ({"Authorization": TOKEN}, 401)]:
            response = http.post("/api/questions", json=[{"id": "n1", "title": "kayak"}],
                                 headers=headers)
            assert response.status_code == status, headers
        assert http.get("/api/search", params={"q": "kayak"}).json()["hits"] == []
        # writes allowed: another method is not allowed, and the API is not "read-only"
        assert http.put("/api/questions/t01", headers=auth).json()["detail"] == \
            "Method Not Allowed"
        # a JSON list, then JSONL; served at once
        doc = http.post("/api/questions", headers=auth, json=[
            {"id": "n1", "title": "Where to rent a kayak?", "category": "Shopping"}]).json()
        assert doc["added"] == 1 and doc["n_questions"] == 13
        schema.Change.model_validate(doc)
        assert doc["generation"] == http.get("/health").json()["generation"]
        assert [h["id"] for h in http.get("/api/search", params={"q": "kayak"}).json()["hits"]] \
            == ["n1"]
        response = http.post("/api/questions", headers=auth,
                             content=b'{"id": "n2", "title": "kayak trips"}\n\n'
                                     b'{"id": "n3", "title": "kayak prices"}\n')
        assert response.status_code == 201 and response.json()["n_questions"] == 15
        again = http.post("/api/questions", headers=auth, json={"id": "n2", "title": "canoe"})
        assert again.status_code == 400 and "replace=true" in again.json()["detail"]
        replaced = http.post("/api/questions", headers=auth, params={"replace": True},
                             json={"id": "n2", "title": "canoe trips"})
        assert replaced.json() | {"generation": None} == {
            "added": 1, "deleted": 1, "n_questions": 15, "generation": None}
        bad = http.post("/api/questions", headers=auth, content=b'{"id": "x"}\nnot json\n')
        assert bad.status_code == 400 and bad.json()["detail"].startswith(
            "line 2 of the body is not JSON")
        # deletions
        assert http.delete("/api/questions/n1").status_code == 401
        deleted = http.delete("/api/questions/n1", headers=auth)
        assert deleted.status_code == 200 and deleted.json()["deleted"] == 1
        assert http.delete("/api/questions/n1", headers=auth).status_code == 404
        assert http.get("/api/questions/n1").status_code == 404
        assert "n1" not in {h["id"] for h in http.get(
            "/api/search", params={"q": "kayak"}).json()["hits"]}
        # no length, or too long a body
        assert http.post("/api/questions", headers={**auth, "Transfer-Encoding": "chunked"},
                         content=iter([b'{"id": "n9", "title": "x"}'])).status_code == 411
    assert SearchEngine.open(path).n_questions == 14  # what the server wrote is the index
    with pytest.raises(Exception, match="question 1 of the body: missing required field 'id'"):
        parse_questions(b'[{"title": "no id"}]')


def test_ranking_names_the_ranker_that_ran(tmp_path, toy_questions, bm25_position_qrels,
                                           given_run):
    from cqa_search.features import GIVEN_FEATURES
    from cqa_search.training import train_ranker

    path = tmp_path / "idx"
    build_index(toy_questions, path)
    qrels = bm25_position_qrels(path, -1)
    queries = [{"id": q, "text": t} for q, t in (
        ("v1", "which office renews a residence visa"), ("v2", "my wife has a family visa"),
        ("s1", "cheap sofa and furniture shops"), ("c1", "the car engine will not start"))]
    train_ranker(path, queries, qrels, given_run(qrels), no_cv=True)
    with TestClient(create_app(path)) as http:
        doc = http.get("/api/search", params={"q": "renew my visa", "explain": "true"}).json()
    ranker = doc["ranking"]["ranker"]
    assert ranker["name"] == "ranker-search" and not set(GIVEN_FEATURES) & set(ranker["features"])
    assert doc["hits"] and all(not set(GIVEN_FEATURES) & set(h["contributions"])
                               for h in doc["hits"])


def test_the_hybrid_first_stage_over_http(vectors_index, monkeypatch):
    """An index with word vectors: the API says the first stage's weight, explains both
    parts of each hit's first-stage score, and takes a question as title and body."""
    from cqa_search import SearchConfig
    from cqa_search.retrieval.first_stage import DEFAULT_WEIGHT
    from cqa_search.server.app import HYBRID_VARIABLE, app_from_environment

    engine = SearchEngine.open(vectors_index)
    with TestClient(create_app(vectors_index)) as http:
        doc = http.get("/api/search", params={"q": "sinuses plugged up", "explain": "true"}).json()
        schema.SearchResults.model_validate(doc, strict=True)
        assert doc["ranking"]["hybrid"] == DEFAULT_WEIGHT
        for hit in doc["hits"]:  # no ranker: the hits are in the first stage's order
            parts = hit["first_stage"]
            assert parts["score"] == pytest.approx(hit["score"])
            assert parts["term_part"] + parts["cosine_part"] == pytest.approx(hit["score"])
        plain = http.get("/api/search", params={"q": "sinuses plugged up"}).json()
        assert all("first_stage" not in h for h in plain["hits"])
        title, body = "dog barking", "how do I stop my dog barking at night"
        doc = http.get("/api/search", params={"title": title, "body": body, "k": 5}).json()
        expected = engine.search(title=title, body=body, k=5)
        assert [h["id"] for h in doc["hits"]] == list(expected.doc_ids)
        assert doc["query"] == f"{title}\n{body}"
        assert max(h["features"]["field_body_bm25"] for h in doc["hits"]) > 0
        dated = http.get("/api/search", params={"title": title, "after": "2001"}).json()
        assert dated["hits"] == []  # the demo questions have no dates
    with TestClient(create_app(vectors_index, hybrid=None)) as http:
        assert http.get("/api/search", params={"q": "dog"}).json()["ranking"]["hybrid"] is None
    monkeypatch.setenv("CQA_SEARCH_INDEX", str(vectors_index))
    monkeypatch.setenv(HYBRID_VARIABLE, "0.6")  # serve --hybrid 0.6 with worker processes
    with TestClient(app_from_environment()) as http:
        doc = http.get("/api/search", params={"q": "dog barking", "k": 3}).json()
    expected = engine.with_config(SearchConfig(hybrid=0.6)).search("dog barking", k=3)
    assert doc["ranking"]["hybrid"] == 0.6 and [h["id"] for h in doc["hits"]] == \
        list(expected.doc_ids)


def test_a_question_another_process_added_can_be_deleted(tmp_path, toy_questions):
    """serve --workers N: a DELETE can reach a process that has not yet followed the
    generation where another process added the question. The index on disk decides: it
    was a 404 "no question" (seen in test_serve_command under load)."""
    from cqa_search.index.live import add_questions

    path = tmp_path / "idx"
    build_index(toy_questions, path)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(path, interval=3600, write_token=TOKEN)) as http:
        add_questions(path, [Question("n1", "Where to rent a kayak?")])  # another process
        deleted = http.delete("/api/questions/n1", headers=auth)
        assert deleted.status_code == 200 and deleted.json()["deleted"] == 1
        missing = http.delete("/api/questions/n1", headers=auth)
        assert missing.status_code == 404 and missing.json()["detail"] == \
            "no question 'n1' in the archive"
    assert SearchEngine.open(path).n_questions == 12


def test_a_date_no_int64_holds_is_refused_and_filters_keep_working(tmp_path, toy_questions):
    """Issue 43: {"date": 1e30} was added (201), then /api/tags, every tag: and date:
    filter answered 500 for every user until it was deleted; filters at the end of the
    calendar answered 500."""
    path = tmp_path / "idx"
    build_index(toy_questions, path)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(path, write_token=TOKEN)) as http:
        for value in (1e30, "99999999999999999999", 253402300800):
            refused = http.post("/api/questions", headers=auth,
                                json={"id": "p", "title": "x", "body": "y", "date": value})
            assert refused.status_code == 400 and refused.json()["detail"].startswith(
                "question 1 of the body: field 'date': ")
        assert http.post("/api/questions", headers=auth, json={
            "id": "last", "title": "visa at the end", "date": "9999-12-31T23:59:59",
            "tags": ["eyes"]}).status_code == 201
        assert http.get("/api/tags").status_code == 200
        for params, found in [({"q": "visa tag:eyes"}, ["last"]),
                              ({"q": "visa date:9999-12-31"}, ["last"]),
                              ({"q": "visa", "after": "9999-12"}, ["last"]),
                              ({"q": "visa date:9999-12..", "before": "9999-12-31"}, [])]:
            response = http.get("/api/search", params=params)
            assert response.status_code == 200, params
            assert [h["id"] for h in response.json()["hits"]] == found, params
        response = http.get("/api/search", params={"q": "visa date:>9999"})
        assert response.status_code == 400 and response.json()["detail"] == (
            "bad date filter 'date:>9999': no question is dated after 9999-12-31 (dates run "
            "from 0001-01-01 to 9999-12-31)")


@pytest.mark.parametrize("error, status", [(errno.ENOSPC, 507), (errno.EFBIG, 507),
                                           (errno.EROFS, 503), (errno.EACCES, 503)])
def test_a_write_the_machine_refuses_is_an_error_of_the_service(tmp_path, toy_questions,
                                                                monkeypatch, error, status):
    """A full disk or a read-only index under --allow-writes: 507 or 503 saying so, the
    index as it was; it was a 500 "internal error" and a traceback in the server's log."""
    import os

    from cqa_search.server import writes

    def refused(*args, **kwargs):
        raise OSError(error, os.strerror(error), str(tmp_path / "idx" / ".tmp-x"))

    path = tmp_path / "idx"
    build_index(toy_questions, path)
    monkeypatch.setattr(writes, "add_questions", refused)
    monkeypatch.setattr(writes, "delete_questions", refused)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(path, write_token=TOKEN), raise_server_exceptions=False) as http:
        for response in [http.post("/api/questions", headers=auth, json={"id": "n", "title": "x"}),
                         http.delete("/api/questions/t01", headers=auth)]:
            assert response.status_code == status
            assert response.json()["detail"] == (f"cannot write the index: "
                                                 f"{os.strerror(error)} (it is unchanged)")
        assert http.get("/health").json()["n_docs"] == 12
