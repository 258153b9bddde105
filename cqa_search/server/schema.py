"""The JSON documents of the API, as pydantic models: they make the OpenAPI schema.

The documents themselves are made by :class:`cqa_search.presentation.Presenter` (the same
as ``cqa-search query --json``); the tests check every response against these models.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Segment(BaseModel):
    """A piece of text; ``match``: a word of the query (to highlight)."""

    text: str
    match: bool


class Answer(BaseModel):
    label: str = Field(description='"best answer" (marked so in the archive), "chosen '
                                   'answer" (by the index\'s answer selector) or "first '
                                   'answer"')
    snippet: str = Field(description="a query-biased excerpt of the answer")
    snippet_marked: list[Segment] = Field(description="the same excerpt, matches marked")


class FirstStage(BaseModel):
    """The two parts of a hit's hybrid first-stage score: ``score = term_part +
    cosine_part``, ``term_part = (1 - a) * term / term_max``, ``cosine_part = a *
    cosine``."""

    score: float
    a: float = Field(description="the weight of the cosine")
    term_model: str = Field(description="the retrieval model (its feature name)")
    term: float = Field(description="its score of the hit")
    term_max: float = Field(description="its best score of the archive for the query")
    cosine: float = Field(description="the cosine of the query's and the hit's question "
                                      "vectors (SIF averages of word vectors)")
    term_part: float
    cosine_part: float


class Hit(BaseModel):
    rank: int
    id: str = Field(description="the question's id in the archive")
    score: float
    title: str = Field(description="the title (or the start of the body when there is none)")
    category: str | None
    tags: list[str]
    date: str | None = Field(description="the creation date, ISO 8601 in UTC (YYYY-MM-DD "
                                         "at midnight, else YYYY-MM-DDTHH:MM:SSZ); null "
                                         "without one")
    url: str | None = Field(description="the original post, when the archive has one")
    n_answers: int
    snippet: str = Field(description="a query-biased excerpt of the body")
    title_marked: list[Segment] = Field(description="the title (or the start of the body "
                                                    "when there is none), matches marked")
    snippet_marked: list[Segment] = Field(description="the body's excerpt, matches marked")
    answer: Answer | None
    features: dict[str, float] = Field(description="every feature score of the hit")
    contributions: dict[str, float] | None = Field(
        None, description="with explain=true and a ranker: each feature's share of the "
                          "score (the ranker's weight times the normalised feature), largest "
                          "first; the score is their sum plus the ranker's intercept (absent "
                          "for a ranker that normalises the features per query)")
    first_stage: FirstStage | None = Field(
        None, description="with explain=true after the hybrid first stage: the two parts "
                          "of the hit's first-stage score (which made it a candidate)")


class Ranker(BaseModel):
    name: str = Field(description="the stored ranker that ran: the configured one, or its "
                                  "NAME-search when that one reads the given-run features")
    learner: str | None
    n_candidates: int = Field(description="how many retrieval candidates it reorders")
    intercept: float
    features: list[str]


class Ranking(BaseModel):
    retrieval: str = Field(description="the term model that retrieves the candidates")
    hybrid: float | None = Field(description="the weight a of the word-vector cosine in "
                                             "the first stage: (1 - a) * term / max term + "
                                             "a * cosine; None: the term model alone")
    ranker: Ranker | None = Field(description="the learned ranker that orders them; None: "
                                              "the retrieval model's order")


class FacetCount(BaseModel):
    name: str
    count: int = Field(description="hits with it")


class Facets(BaseModel):
    categories: list[FacetCount] = Field(description="the hits' categories, most first")
    tags: list[FacetCount] = Field(description="the hits' tags (at most 20), most first")


class SearchResults(BaseModel):
    query: str = Field(description="the words searched (the query syntax removed)")
    category: str | None = Field(description="the category filter applied")
    filters: list[str] = Field(description="every requirement and filter the search "
                                           "applied, each in the query syntax (+word, "
                                           '"a phrase", title:word, -word, tag:NAME, '
                                           "category:NAME, date:A..B, ...): how q was read")
    notices: list[str] = Field(description="what of q was not read as the syntax it looks "
                                           "like: AND, OR, NOT searched as words in a query "
                                           "without other syntax, a field name without a "
                                           "value left out")
    query_terms: list[str] = Field(description="the analysed query terms found in the index")
    matched_in: str = Field(description='the field the hits matched in: "question", or '
                                        '"answers" when no question holds the words')
    relaxed: bool = Field(description="no question has every required word or phrase of "
                                      "the query: the hits are those of its words without "
                                      "these requirements")
    unknown_words: list[str] = Field(description="query words the archive does not have")
    suggestions: dict[str, list[str]] = Field(description='"did you mean" words for each '
                                                          "unknown word")
    did_you_mean: str | None = Field(description="the query with unknown words corrected")
    ranking: Ranking
    facets: Facets = Field(description="the hits' categories and tags, with how many hits "
                                       "have each (/api/categories and /api/tags count the "
                                       "archive)")
    hits: list[Hit]
    generation: str = Field(description="the index generation searched")


class Question(BaseModel):
    """An archived question with all its answers (and any other field of its record)."""

    model_config = ConfigDict(extra="allow")

    id: str
    title: str
    body: str
    category: str | None
    tags: list[str]
    answers: list[str]
    best_answer: int | None = Field(description="index of the best answer in answers")
    duplicate_of: list[str]
    url: str | None
    generation: str


class Category(BaseModel):
    name: str
    count: int = Field(description="questions of this category in the archive")


class Completion(BaseModel):
    id: str
    title: str = Field(description="the archived title, which begins with the typed words")
    answers: int = Field(description="its number of answers")


class Completions(BaseModel):
    query: str = Field(description="the text completed")
    completions: list[Completion] = Field(description="more answers first, then shorter "
                                                      "titles; a title offered once")
    generation: str


class Categories(BaseModel):
    categories: list[Category] = Field(description="most questions first (categories "
                                                   "whose questions were all deleted left out)")
    n_docs: int = Field(description="questions in the archive, deleted ones left out")
    generation: str


class Tags(BaseModel):
    tags: list[Category] = Field(description="the tags of most questions first (deleted "
                                             "questions left out); a tag: filter keeps one")
    n_tags: int = Field(description="distinct tags in the archive")
    generation: str


class Change(BaseModel):
    """What a write did (``serve --allow-writes``)."""

    added: int = Field(description="questions added (replacements included)")
    deleted: int = Field(description="questions deleted (replaced ones included)")
    n_questions: int = Field(description="questions in the archive now")
    generation: str = Field(description="the index generation written (served from now on)")


class Health(BaseModel):
    status: str = Field(description='"ok", or "stale" when the index can no longer be '
                                    "opened and the last good generation is served")
    generation: str
    n_docs: int = Field(description="questions in the archive, deleted ones left out")
    error: str | None
    version: str


class Error(BaseModel):
    status: int
    error: str
    detail: str


class CompactAnswer(BaseModel):
    label: str = Field(description='"best answer", "chosen answer" or "first answer"')
    snippet: str = Field(description="a query-biased excerpt of the answer")


class CompactHit(BaseModel):
    """A hit as the MCP tools give it: what an assistant reads, without the marked
    segments and the features of :class:`Hit`."""

    rank: int
    id: str = Field(description="the question's id (for similar and get_question)")
    score: float
    title: str
    category: str | None
    tags: list[str]
    date: str | None = Field(description="the creation date, ISO 8601 in UTC; null without")
    url: str | None = Field(description="the original post, when the archive has one")
    n_answers: int
    snippet: str = Field(description="a query-biased excerpt of the body")
    answer: CompactAnswer | None


class CompactResults(BaseModel):
    """The result of the MCP tools ``search`` (with ``query``) and ``similar`` (with
    ``like``)."""

    query: str | None = Field(default=None, description="the query searched")
    like: str | None = Field(default=None, description="the question whose like these are")
    category: str | None = Field(description="the category filter applied")
    filters: list[str] = Field(description="every filter applied, in the query syntax")
    notices: list[str] = Field(description="what of the query was not read as syntax, and "
                                           "tags no question has")
    relaxed: bool = Field(description="no question had every required word: the words' hits")
    unknown_words: list[str] = Field(description="query words the archive does not have")
    hits: list[CompactHit]
    generation: str = Field(description="the index generation searched")
