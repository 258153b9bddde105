"""The dictd reader: entries, headers, plain and compressed dictionaries, stems."""
import gzip
import os

import pytest

from cqa_search import Analyzer
from cqa_search.factorization.dictd import DictdDictionary, _b64_number, parse_dictd_entry

DICTD = os.path.join(os.path.dirname(__file__), "..", "data", "dictd")
PLAIN = os.path.join(DICTD, "freedict-eng-tst.index")
DZ = os.path.join(DICTD, "freedict-eng-tsz.index")


def test_base64_numbers_are_positional():
    assert [_b64_number(s) for s in ("A", "B", "/", "BA", "B/", "CB")] == [0, 1, 63, 64, 127, 129]


@pytest.mark.parametrize("path", [PLAIN, DZ], ids=["plain", "dictzip"])
def test_dictd_reader_reads_entries_and_skips_headers(path):
    d = DictdDictionary(path)
    assert d.dict_path.endswith(".dict" if path == PLAIN else ".dict.dz")
    words = d.headwords()
    assert not any(w.startswith("00") for w in words)
    assert sorted(words) == sorted(["a lot", "bank", "cheap", "doha", "get", "house", "office",
                                    "renew", "sofa", "visa", "work"])
    assert d.entries("house") == ["house /haus/\nmaison\n"]
    # two entries (senses) for one headword, in index order, all their translations
    assert len(d.entries("bank")) == 2
    assert d.translations("bank") == ["banque", "rive", "berge", "déposer"]
    assert d.translations("bank", 2) == ["banque", "rive"]
    assert d.translations("get", 3) == ["obtenir", "recevoir", "devenir"]
    assert d.translations("cheap") == ["bon marché", "pas cher"]
    assert d.translations("sofa") == ["canapé", "sofa"]
    assert d.translations("office") == ["bureau"]   # indented note skipped
    assert d.translations("DOHA") == ["Doha"] and "doha" in d and "Doha" in d
    assert d.translations("missing") == [] and "missing" not in d


def test_compressed_and_plain_dictionaries_agree():
    plain, dz = DictdDictionary(PLAIN), DictdDictionary(DZ)
    with open(plain.dict_path, "rb") as f, gzip.open(dz.dict_path, "rb") as g:
        assert f.read() == g.read()
    for word in plain.headwords():
        assert plain.entries(word) == dz.entries(word)


def test_dictd_reader_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="dictd index not found"):
        DictdDictionary(tmp_path / "none.index")
    (tmp_path / "x.index").write_text("house\tA\tB\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match=r"x\.dict\.dz and .*x\.dict\)"):
        DictdDictionary(tmp_path / "x.index")
    (tmp_path / "x.dict").write_text("house\nmaison\n", encoding="utf-8")
    (tmp_path / "x.index").write_text("house\t!!\tB\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1: offset and length must be base-64"):
        DictdDictionary(tmp_path / "x.index").headwords()


@pytest.mark.parametrize("text, headword, expected", [
    ("get /get/\n1. obtenir\n2. recevoir, devenir\n", "get", ["obtenir", "recevoir", "devenir"]),
    ("bank /b/\nBank <fem>, Gruppe <fem>\n see: {banks}\n", "bank", ["Bank", "Gruppe"]),
    ("x /x/\nholen, schaffen <v, trans> [Geld]\n", "x", ["holen", "schaffen"]),
    ("qatar /k/\nKatar <neut> [geogr.] QA,  /kˈɑː/\n", "qatar", ["Katar QA"]),
    ("sofa\ncanapé (meuble); sofa\nsofa\n", "sofa", ["canapé", "sofa"]),
    ("house /haus/\nmaison\n", None, ["maison"]),        # headword line found by /.../
    ("maison\n", "house", ["maison"]),                    # no headword line
])
def test_parse_dictd_entry(text, headword, expected):
    assert parse_dictd_entry(text, headword) == expected


def test_resolve_by_stem():
    d = DictdDictionary(PLAIN)
    stem = Analyzer(stem="snowball").stem_word
    assert d.resolve("house") == "house"
    assert d.resolve("houses") is None
    assert d.resolve("houses", stem) == "house"
    assert d.resolve("renewing", stem) == "renew"
    assert d.resolve("zebra", stem) is None
