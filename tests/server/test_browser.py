"""The search page in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by Selenium against the server on a loopback port.

Screenshots go to ``$CQA_SEARCH_SCREENSHOTS`` (default: the test's temporary directory).
"""
import os
import re
import shutil
import socket
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from cqa_search.server import create_app

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.common.exceptions import (NoSuchElementException,  # noqa: E402
                                        StaleElementReferenceException)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

TOY_ARCHIVE = Path(__file__).resolve().parents[1] / "data" / "toy_archive.jsonl"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="headless Chromium is not installed (apt-get install chromium chromium-driver)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-dev-shm-usage", "--window-size=1280,1000"]


@pytest.fixture(scope="module")
def hybrid_server(vectors_index, tmp_path_factory):
    """The server of the demo archive with word vectors and a ranker trained (by `train`)
    on its judged queries: the hybrid first stage."""
    import shutil

    from cqa_search.data import DEMO_QRELS, DEMO_QUERIES, demo_dir
    from cqa_search.evaluation import read_qrels, read_queries
    from cqa_search.training import train_ranker

    path = tmp_path_factory.mktemp("hybrid") / "index"
    shutil.copytree(vectors_index, path)
    train_ranker(path, read_queries(demo_dir() / DEMO_QUERIES),
                 read_qrels(demo_dir() / DEMO_QRELS), cv=3)
    yield from _serve(path)


@pytest.fixture(scope="module")
def sharded_hybrid_server(ray_session, tmp_path_factory):
    """As :func:`hybrid_server`, the demo archive in 2 shards on Ray (the word vectors
    fitted from the shards, each holding its rows)."""
    from cqa_search.data import DEMO_ARCHIVE, DEMO_QRELS, DEMO_QUERIES, demo_dir
    from cqa_search.distributed.build import build_sharded_index
    from cqa_search.evaluation import read_qrels, read_queries
    from cqa_search.training import fit_family, train_ranker

    path = tmp_path_factory.mktemp("sharded-hybrid") / "index"
    build_sharded_index(str(demo_dir() / DEMO_ARCHIVE), path, 2)
    fit_family(path, "embeddings", dim=16, neighbours=10)
    train_ranker(path, read_queries(demo_dir() / DEMO_QUERIES),
                 read_qrels(demo_dir() / DEMO_QRELS), cv=3)
    yield from _serve(path)


def _serve(index):
    """The server of ``index`` on a free loopback port, in a thread; yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(create_app(index), log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=30)
    sock.close()


@pytest.fixture(scope="module")
def server(ranked_index):
    yield from _serve(ranked_index)


@pytest.fixture(scope="module")
def sharded_server(ray_session, tmp_path_factory, train_ranker):
    """The server of the toy archive in 3 shards on Ray, with its own trained ranker."""
    from cqa_search.distributed.build import build_sharded_index

    path = tmp_path_factory.mktemp("sharded") / "index"
    build_sharded_index(str(TOY_ARCHIVE), path, 3)
    train_ranker(path)
    yield from _serve(path)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def shots(tmp_path):
    folder = os.environ.get("CQA_SEARCH_SCREENSHOTS") or str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    return folder


def wait(driver, condition, what, timeout=60):
    """Poll ``condition`` until true (elements may be replaced meanwhile: re-rendering)."""
    return WebDriverWait(driver, timeout, poll_frequency=0.05, ignored_exceptions=(
        NoSuchElementException, StaleElementReferenceException)).until(
        lambda d: condition(d), message=f"waiting for {what}")


def hits(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#hits .hit")


def click(driver, selector, what):
    """Click the element of ``selector`` once it is there (found again if re-rendered)."""
    def clicked(d):
        found = d.find_elements(By.CSS_SELECTOR, selector)
        if found:
            found[0].click()
        return bool(found)
    wait(driver, clicked, what)


def params(driver):
    return {k: v[0] for k, v in parse_qs(urlparse(driver.current_url).query).items()}


def api_doc_ids(server, **query):
    import httpx2 as httpx

    return [h["id"] for h in httpx.get(server + "/api/search", params=query).json()["hits"]]


@pytest.mark.parametrize("which", ["server", "sharded_server"])
def test_search_facet_explain_keyboard_and_history(which, request, browser, shots):
    """The page's search, on an index and on the same archive in shards on Ray."""
    server = request.getfixturevalue(which)
    shots = os.path.join(shots, which)
    os.makedirs(shots, exist_ok=True)
    d = browser
    d.get(server + "/")
    facet = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#facet a"), "the facet")
    assert [a.text.split("\n") for a in facet] == [
        ["All categories", "12"], ["Cars", "4"], ["Visas", "4"], ["Shopping", "3"]]
    assert "12 questions in 3 categories" in d.find_element(By.ID, "status").text

    # "/" focuses the search box; Enter searches
    d.find_element(By.TAG_NAME, "body").send_keys("/")
    box = d.switch_to.active_element
    assert box.get_attribute("id") == "q"
    box.send_keys("renew my visa", Keys.ENTER)
    wait(d, lambda d: hits(d), "the hits")
    assert params(d) == {"q": "renew my visa"}
    shown = [a.get_attribute("data-doc") for a in d.find_elements(By.CSS_SELECTOR, ".hit-link")]
    assert shown == api_doc_ids(server, q="renew my visa")
    first = hits(d)[0]
    marks = [m.text.lower() for m in first.find_elements(By.CSS_SELECTOR, ".hit-title mark")]
    assert marks and all(m.startswith(("renew", "visa")) for m in marks)
    assert first.find_element(By.CSS_SELECTOR, ".answer .label").text.lower() == "best answer"
    status = d.find_element(By.ID, "status").text
    assert "ranked by bm25f + ranksvm ranker" in status

    # why a hit ranks: its feature contributions
    table = first.find_element(By.CSS_SELECTOR, "details.why table")
    assert not table.is_displayed()
    first.find_element(By.CSS_SELECTOR, "details.why summary").click()
    wait(d, lambda d: table.is_displayed(), "the explanation")
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) > 5 and "bm25" in {r.find_element(By.TAG_NAME, "th").text for r in rows}
    assert "ranksvm ranker's feature contributions" in table.find_element(By.TAG_NAME, "caption").text
    d.save_screenshot(os.path.join(shots, "search-desktop.png"))

    # the facet filters, and the URL says so
    box = d.find_element(By.ID, "q")
    box.clear()
    box.send_keys("car visa", Keys.ENTER)
    wait(d, lambda d: params(d) == {"q": "car visa"}, "the second search")
    wait(d, lambda d: len({h.find_element(By.CSS_SELECTOR, ".category").text
                           for h in hits(d)}) == 2, "hits of two categories")
    shown = [a.get_attribute("data-doc") for a in d.find_elements(By.CSS_SELECTOR, ".hit-link")]
    click(d, "#facet a[aria-label^='Cars']", "the Cars facet")
    wait(d, lambda d: params(d).get("category") == "Cars", "the category in the URL")
    wait(d, lambda d: hits(d) and all(h.find_element(By.CSS_SELECTOR, ".category").text == "Cars"
                                      for h in hits(d)), "the Cars hits")
    current = d.find_element(By.CSS_SELECTOR, "#facet a[aria-current='true']")
    assert current.get_attribute("aria-label").startswith("Cars")

    # the back button restores the previous search
    d.back()
    wait(d, lambda d: params(d) == {"q": "car visa"}, "the previous URL")
    wait(d, lambda d: [a.get_attribute("data-doc") for a in
                       d.find_elements(By.CSS_SELECTOR, ".hit-link")] == shown, "the previous hits")

    # arrow keys move between hits; Enter opens one with all its answers; back again
    box = d.find_element(By.ID, "q")
    box.click()
    box.send_keys(Keys.ARROW_DOWN)
    assert d.switch_to.active_element.get_attribute("data-doc") == shown[0]
    d.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
    assert d.switch_to.active_element.get_attribute("data-doc") == shown[1]
    d.switch_to.active_element.send_keys(Keys.ENTER)
    wait(d, lambda d: params(d).get("question") == shown[1], "the question view")
    title = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#question h2"), "its title")
    assert title[0].text and d.find_elements(By.CSS_SELECTOR, "#question .answers li")
    # its similar questions (itself left out), as the API gives them
    similar = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#question .similar-link"),
                   "the similar questions")
    import httpx2 as httpx

    expected = [h["id"] for h in httpx.get(f"{server}/api/questions/{shown[1]}/similar",
                                           params={"k": 5}).json()["hits"]]
    assert [a.get_attribute("data-doc") for a in similar] == expected
    assert shown[1] not in expected and expected
    d.save_screenshot(os.path.join(shots, "question-similar.png"))
    d.switch_to.active_element.send_keys(Keys.ENTER)  # the focused "back" link
    wait(d, lambda d: params(d) == {"q": "car visa"}, "the results again")

    # the tag facet adds a tag: filter to the query, and takes it away again
    click(d, "#tag-facet a[aria-label^='tag family']", "the tag facet")
    wait(d, lambda d: params(d) == {"q": "car visa tag:family"}, "the tag filter in the URL")
    wait(d, lambda d: [a.get_attribute("data-doc") for a in d.find_elements(
        By.CSS_SELECTOR, ".hit-link")] == api_doc_ids(server, q="car visa tag:family"),
        "the hits with that tag")
    assert d.find_element(By.CSS_SELECTOR, "#tag-facet a[aria-current='true']").text.startswith(
        "family")
    d.save_screenshot(os.path.join(shots, "search-tag-facet.png"))
    click(d, "#tag-facet a[aria-current='true']", "the active tag")
    wait(d, lambda d: params(d) == {"q": "car visa"}, "the tag filter taken away")

    # "did you mean"
    box = d.find_element(By.ID, "q")
    box.clear()
    box.send_keys("cheap furnture", Keys.ENTER)
    # (the line also shows the filters of a search: the tag's, until this search's answer)
    hint = wait(d, lambda d: d.find_element(By.ID, "did-you-mean").is_displayed()
                and d.find_element(By.ID, "did-you-mean").text.startswith("Did you mean")
                and d.find_element(By.ID, "did-you-mean"), "did you mean")
    assert hint.text == "Did you mean cheap furniture?"
    hint.find_element(By.TAG_NAME, "a").click()
    wait(d, lambda d: params(d) == {"q": "cheap furniture"}, "the corrected search")

    # only words the analysis leaves out: the page says why nothing was found
    box = d.find_element(By.ID, "q")
    box.clear()
    box.send_keys("how do I", Keys.ENTER)
    wait(d, lambda d: d.find_element(By.ID, "status").text.startswith("No words to search for"),
         "why nothing was found")
    assert not hits(d)

    errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def test_readable_at_phone_width(server, browser, shots):
    d = browser
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                      {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
    try:
        d.get(server + "/?q=where+to+buy+a+cheap+sofa")
        wait(d, lambda d: hits(d), "the hits")
        hits(d)[0].find_element(By.CSS_SELECTOR, "details.why summary").click()
        # nothing wider than the screen: no sideways scrolling of the page
        assert d.execute_script("return document.documentElement.scrollWidth") <= 390
        size = d.execute_script("return parseFloat(getComputedStyle("
                                "document.querySelector('.snippet')).fontSize)")
        assert size >= 14
        d.save_screenshot(os.path.join(shots, "search-phone.png"))
    finally:
        d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_suggestions_while_a_question_is_typed(server, browser, shots):
    """The most similar questions appear under the box while a question is typed (after a
    pause, without Enter), each request cancelling the one before. The latency of each
    batch of keystrokes (last keystroke to suggestions shown) is measured and reported,
    not asserted: speed lives in the benchmarks."""
    import json

    d = browser
    d.get(server + "/")
    box = wait(d, lambda d: d.find_element(By.ID, "q"), "the search box")
    section = d.find_element(By.ID, "suggest")
    report = []
    typed = ""
    for batch in ["renew my", " residence", " visa quickly"]:
        started = time.monotonic()
        box.send_keys(batch)
        typed += batch
        wait(d, lambda d: section.is_displayed() and section.get_attribute("data-query") == typed,
             f"the suggestions for {typed!r}")
        shown = [a.get_attribute("data-doc")
                 for a in section.find_elements(By.CSS_SELECTOR, "#suggest-list a")]
        assert shown == api_doc_ids(server, title=typed, k=5)  # plain text, not syntax
        report.append({"typed": typed, "keystrokes": len(batch),
                       "page_ms": int(section.get_attribute("data-ms")),
                       "wall_ms": round(1000 * (time.monotonic() - started))})
    assert params(d) == {}  # nothing was searched: no Enter
    d.save_screenshot(os.path.join(shots, "suggestions.png"))

    # a slow network: a request still in flight is cancelled by the next one, and the
    # suggestions shown are those of the text in the box
    d.execute_cdp_cmd("Network.enable", {})
    d.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 600, "downloadThroughput": -1, "uploadThroughput": -1})
    try:
        box.clear()
        box.send_keys("car battery")
        wait(d, lambda d: int(section.get_attribute("data-sent") or 0) > 3, "a request sent")
        time.sleep(0.1)  # in flight (600 ms)
        box.send_keys(" dies in winter")
        wait(d, lambda d: section.is_displayed() and section.get_attribute("data-query") ==
             "car battery dies in winter", "the suggestions of the whole text")
        assert int(section.get_attribute("data-cancelled") or 0) >= 1
    finally:
        d.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    # Enter searches and the suggestions go; a suggestion opens its question
    box.send_keys(Keys.ENTER)
    wait(d, lambda d: hits(d) and not section.is_displayed(), "the results")
    box = d.find_element(By.ID, "q")
    box.send_keys(" engine")
    wait(d, lambda d: section.is_displayed(), "new suggestions")
    first = section.find_element(By.CSS_SELECTOR, "#suggest-list a")
    doc = first.get_attribute("data-doc")
    first.click()
    wait(d, lambda d: params(d).get("question") == doc, "the suggested question")
    assert not section.is_displayed()
    with open(os.path.join(shots, "suggest-latency.json"), "w") as f:
        json.dump(report, f, indent=1)
    print("\nsuggestion latency per keystroke batch:", json.dumps(report))
    errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def api_completions(server, text):
    import httpx2 as httpx

    return [c["id"] for c in httpx.get(server + "/api/complete",
                                       params={"q": text}).json()["completions"]]


def test_title_completions_beside_the_asked_before_list(server, browser, shots):
    """Issue 40: while a question is typed, the archived titles that begin with the words
    typed are offered beside the questions asked before (the typed part plain, the rest
    bold), as /api/complete gives them; one opens its question."""
    d = browser
    d.get(server + "/")
    box = wait(d, lambda d: d.find_element(By.ID, "q"), "the search box")
    part = d.find_element(By.ID, "complete")
    asked = d.find_element(By.ID, "asked")
    box.send_keys("visa")
    wait(d, lambda d: part.is_displayed() and part.get_attribute("data-query") == "visa",
         "the titles that begin with 'visa'")
    links = part.find_elements(By.CSS_SELECTOR, "#complete-list a")
    assert [a.get_attribute("data-doc") for a in links] == api_completions(server, "visa") \
        == ["t02", "t11"]  # one answer each: the shorter title first
    assert links[0].text == "Visa renewal documents"
    assert links[0].find_element(By.TAG_NAME, "b").get_attribute("textContent") == \
        " renewal documents"
    box.send_keys(" ")  # a finished word completes only itself: "Visa on", not "Visas"
    wait(d, lambda d: part.get_attribute("data-query") == "visa ", "the titles of 'visa '")
    box.send_keys("on a")
    wait(d, lambda d: part.get_attribute("data-query") == "visa on a" and [
        a.get_attribute("data-doc") for a in part.find_elements(
            By.CSS_SELECTOR, "#complete-list a")] == ["t11"], "the titles of 'visa on a'")
    wait(d, lambda d: asked.is_displayed(), "the asked-before list beside them")
    assert part.location["y"] == asked.location["y"]  # side by side at desktop width
    d.save_screenshot(os.path.join(shots, "title-completions.png"))
    box.send_keys("x")  # no title begins so: the titles' part goes, the asked-before stays
    wait(d, lambda d: part.get_attribute("data-query") == "visa on ax" and
         not part.is_displayed(), "no titles")
    assert d.find_element(By.ID, "suggest").is_displayed()
    box.send_keys(Keys.BACKSPACE)
    wait(d, lambda d: part.is_displayed(), "the titles again")
    part.find_element(By.CSS_SELECTOR, "#complete-list a").click()
    wait(d, lambda d: params(d).get("question") == "t11", "the completed question")
    errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


@pytest.mark.parametrize("which", ["hybrid_server", "sharded_hybrid_server"])
def test_why_this_rank_shows_both_parts_of_the_first_stage(which, request, browser, shots):
    """With word vectors, a hit's explanation starts with the two parts of the score that
    made it a candidate (the BM25 part and the cosine part), then the ranker's; on a
    sharded index too."""
    d = browser
    d.get(request.getfixturevalue(which) + "/?q=" + "sinuses+plugged+up+and+head+feels+heavy")
    wait(d, lambda d: hits(d), "the hits")
    status = d.find_element(By.ID, "status").text
    # train's default learner, or the first stage's order as a one-feature RankSVM
    assert re.search(r"ranked by bm25f \+ word vectors \+ (anchored|ranksvm) ranker", status)
    first = hits(d)[0]
    first.find_element(By.CSS_SELECTOR, "details.why summary").click()
    stage = first.find_element(By.CSS_SELECTOR, "details.why .first-stage")
    wait(d, lambda d: stage.is_displayed(), "the explanation")
    text = stage.text
    assert text.startswith("Candidate score ") and " × bm25f " in text and " × cosine " in text
    caption = first.find_element(By.CSS_SELECTOR, "details.why caption").text
    assert "bm25f + word-vector candidates" in caption
    d.save_screenshot(os.path.join(shots, f"search-{which}-explain.png"))


@pytest.fixture(scope="module")
def long_names_server(tmp_path_factory):
    """An archive whose category is a site name without spaces (as --category-from site
    gives: quantumcomputing.stackexchange.com)."""
    from cqa_search import Question, build_index

    path = tmp_path_factory.mktemp("long-names") / "index"
    site = "quantumcomputing.stackexchange.com"
    build_index([Question(f"q{i}", f"{title} qubit", category=site) for i, title in
                 enumerate(["How to sleep", "Can not sleep at night", "A Hadamard gate"])],
                path)
    yield from _serve(path)


def test_the_page_says_how_it_read_the_query(long_names_server, browser, shots):
    """A pasted question keeps its words, the page says so and shows the filters applied;
    a long category name stays in its column."""
    d = browser
    d.get(long_names_server + "/?q=" + "I can NOT sleep at night tag:".replace(" ", "+"))
    wait(d, lambda d: hits(d), "the hits")
    assert {h.get_attribute("id") for h in d.find_elements(
        By.CSS_SELECTOR, "#hits .hit-title")} >= {"hit-1", "hit-2"}  # 'sleep' not left out
    note = d.find_element(By.ID, "did-you-mean").text
    assert "Note: NOT was searched as a word" in note and "'tag:' has no value" in note
    d.get(long_names_server + "/?q=qubit+-sleep")
    wait(d, lambda d: "Filters: -sleep." in d.find_element(By.ID, "did-you-mean").text,
         "the filters")
    assert len(hits(d)) == 1
    side = d.find_element(By.CSS_SELECTOR, ".side").rect
    for name in d.find_elements(By.CSS_SELECTOR, ".facet .name"):
        assert name.rect["x"] + name.rect["width"] <= side["x"] + side["width"] + 1, name.text
    d.save_screenshot(os.path.join(shots, "search-filters.png"))


@pytest.fixture(scope="module")
def dated_server(tmp_path_factory):
    """Questions with dates, categories and tags (a StackExchange site by first tag)."""
    from cqa_search import Question, build_index

    path = tmp_path_factory.mktemp("dated") / "index"
    rows = [("q1", "Why do my qubits lose coherence so fast?", "hardware", ("decoherence",),
             "2019-03-05T10:20:00"),
            ("q2", "Qubit coherence times of superconducting chips", "hardware",
             ("decoherence", "superconducting"), "2020-06-01"),
            ("q3", "How fast can a Hadamard gate run on qubits?", "gates", ("hadamard",),
             "2021-01-15"),
            ("q4", "A fast growing hierarchy of quantum algorithms", "theory", ("complexity",),
             None)]
    build_index([Question(i, t, category=c, tags=tags,
                          extra={"creation_date": d} if d else {})
                 for i, t, c, tags, d in rows], path)
    yield from _serve(path)


def test_facets_of_the_hits_dates_and_typed_questions(dated_server, browser, shots):
    """Issue 40: the facets count the hits of the search shown (not the archive), each hit
    shows its day, and the text typed in the box is a question (plain text), not syntax."""
    d = browser
    d.get(dated_server + "/")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#facet a"), "the facet")
    box = d.find_element(By.ID, "q")
    box.send_keys("qubits coherence", Keys.ENTER)
    wait(d, lambda d: len(hits(d)) == 3, "the hits")
    def texts(selector):
        return [a.text.split("\n") for a in d.find_elements(By.CSS_SELECTOR, selector)]

    wait(d, lambda d: d.find_element(By.ID, "facet-title").get_attribute("textContent") ==
         "Categories of these results" and texts("#facet a") == [
             ["All categories", "3"], ["hardware", "2"], ["gates", "1"]],
         "the categories of the hits")
    wait(d, lambda d: texts("#tag-facet a") == [
        ["decoherence", "2"], ["hadamard", "1"], ["superconducting", "1"]],
        "the tags of the hits")
    assert d.find_element(By.ID, "tags-title").get_attribute("textContent") == \
        "Tags of these results"
    days = {h.find_element(By.CSS_SELECTOR, ".hit-link").get_attribute("data-doc"):
            h.find_element(By.TAG_NAME, "time").text for h in hits(d)}
    assert days == {"q1": "2019-03-05", "q2": "2020-06-01", "q3": "2021-01-15"}
    d.save_screenshot(os.path.join(shots, "facets-and-dates.png"))

    # as-you-type: the typed question as plain text ("fast" is a word, not syntax)
    box = d.find_element(By.ID, "q")
    box.clear()
    box.send_keys("my qubits lose coherence too fast")
    section = d.find_element(By.ID, "suggest")
    wait(d, lambda d: section.is_displayed() and section.get_attribute("data-query") ==
         "my qubits lose coherence too fast", "the asked-before list")
    shown = [a.get_attribute("data-doc")
             for a in section.find_elements(By.CSS_SELECTOR, "#suggest-list a")]
    assert shown[0] == "q1" and shown == api_doc_ids(
        dated_server, title="my qubits lose coherence too fast", k=5)
    d.save_screenshot(os.path.join(shots, "asked-before.png"))
    errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
