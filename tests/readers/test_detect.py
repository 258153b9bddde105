"""Format detection on the real files and on our fixtures."""
import pytest

from cqa_search.readers import detect_format

SEMEVAL = [
    "semeval2016-task3-cqa-ql/SemEval2016-Task3-CQA-QL-train-part2.xml",
    "semeval2016-task3-cqa-ql/SemEval2016-Task3-CQA-QL-dev.xml",
    "semeval2016-task3-cqa-ql/SemEval2016-Task3-CQA-QL-test-input.xml",
    "semeval2016-task3-cqa-ql/SemEval2016-Task3-CQA-QL-test.xml",
    "semeval2015-task3-reformatted/"
    "SemEval2015-Task3-CQA-QL-dev-reformatted-excluding-2016-questions-cleansed.xml",
    "semeval2015-task3-reformatted/"
    "SemEval2015-Task3-CQA-QL-test-reformatted-excluding-2016-questions-multiline.xml",
]


@pytest.mark.parametrize("relative", SEMEVAL)
def test_real_semeval(shared_data, relative):
    assert detect_format(shared_data(relative)) == "semeval"


def test_real_stackexchange_folder_and_posts(shared_data):
    folder = shared_data("stackexchange/ai.stackexchange.com")
    assert detect_format(folder) == "stackexchange"
    assert detect_format(folder / "Posts.xml") == "stackexchange"


def test_real_csv(shared_data):
    path = shared_data("semeval2016-task3-cqa-ql/train-part1-derived/TRAIN-BASE.csv")
    assert detect_format(path) == "csv"


@pytest.mark.parametrize("relative, expected", [
    ("yahoo_l6/sample.xml", "yahoo-l6"),
    ("semeval/sample-2016.xml", "semeval"),
    ("semeval/sample-2015-multiline.xml", "semeval"),
    ("stackexchange/tinysite", "stackexchange"),
    ("stackexchange/tinysite/Posts.xml", "stackexchange"),
    ("csv/sample.csv", "csv"),
    ("csv/sample.tsv", "tsv"),
])
def test_fixtures(fixtures, relative, expected):
    assert detect_format(fixtures / relative) == expected


def test_posts_file_under_another_name(tmp_path, fixtures):
    path = tmp_path / "site-posts.xml"
    path.write_bytes((fixtures / "stackexchange" / "tinysite" / "Posts.xml").read_bytes())
    assert detect_format(path) == "stackexchange"
