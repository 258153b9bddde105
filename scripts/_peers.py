"""What the search benchmarks share: the query sets they read or make, and tantivy (the peer
engine) built and searched with the same analysis as ours.

Used by ``bench_search.py`` (its child processes and its ``--quick`` speed check).
"""
from __future__ import annotations

import json
import random

#: tantivy's writer heap for the builds, per indexing thread
TANTIVY_HEAP = 256 * 1024 * 1024


def read_query_texts(path, n=None) -> list:
    """The ``text`` field of each line of a queries JSONL file (the first ``n``)."""
    with open(path, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    return texts if n is None else texts[:n]


def whole_questions(archive, n, out, pool=200_000, seed=7) -> None:
    """Write ``n`` archive questions (title, newline, body) as a queries file: sampled
    among the first ``pool`` records with ``seed`` (archives of any size generated with one
    seed share their first records, so they get the same queries)."""
    records = []
    with open(archive, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= pool:
                break
            records.append(line)
    chosen = sorted(random.Random(seed).sample(range(len(records)), min(n, len(records))))
    with open(out, "w", encoding="utf-8") as f:
        for i in chosen:
            rec = json.loads(records[i])
            f.write(json.dumps({"id": rec["id"], "text": rec["title"] + "\n" + rec["body"]})
                    + "\n")


def tantivy_analyzers(tantivy, stopwords) -> dict:
    """engine -> (tokenizer name, analyzer to register or None for a built-in, query
    analyzer): ``tantivy`` analyses as our default ``Analyzer()`` does (the regex tokens,
    lowercase, the same stopwords, Snowball english); ``tantivy-en_stem`` is its own
    ``en_stem``."""
    F = tantivy.Filter
    same = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(r"(?u)\w{2,}"))
            .filter(F.lowercase()).filter(F.custom_stopword(stopwords))
            .filter(F.stemmer("english")).build())
    # tantivy's en_stem, rebuilt to analyse queries with the same chain.
    en_stem = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(F.remove_long(40))
               .filter(F.lowercase()).filter(F.stemmer("english")).build())
    return {"tantivy": ("cqa_like", same, same), "tantivy-en_stem": ("en_stem", None, en_stem)}


def tantivy_build(archive, index, engine, stopwords, threads=1) -> int:
    """Index ``title + "\\n" + body`` of every record of ``archive`` into the directory
    ``index`` (``threads`` indexing threads, merges waited for); returns its segment
    count."""
    import tantivy

    name, registered, _ = tantivy_analyzers(tantivy, stopwords)[engine]
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("text", stored=False, tokenizer_name=name, index_option="freq")
    index_ = tantivy.Index(sb.build(), path=str(index))
    if registered is not None:
        index_.register_tokenizer(name, registered)
    writer = index_.writer(TANTIVY_HEAP * threads, threads)
    Document = tantivy.Document
    with open(archive, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            writer.add_document(Document(id=rec["id"], text=rec["title"] + "\n" + rec["body"]))
    writer.commit()
    writer.wait_merging_threads()
    index_.reload()
    return index_.searcher().num_segments


def tantivy_searcher(index, engine, stopwords, k=10) -> tuple:
    """``(search, doc_id)`` of a built tantivy index: ``search(text)`` analyses the query
    with the field's analyzer and runs an OR of its terms (what the query parser builds for
    plain words, without phrase queries that need positions), giving the ``k`` best hits;
    ``doc_id(hit)`` reads a hit's id."""
    import tantivy

    name, registered, query_analyzer = tantivy_analyzers(tantivy, stopwords)[engine]
    index_ = tantivy.Index.open(str(index))
    if registered is not None:
        index_.register_tokenizer(name, registered)
    searcher = index_.searcher()
    schema = index_.schema
    Query, Occur = tantivy.Query, tantivy.Occur
    analyze, term_query, search = query_analyzer.analyze, Query.term_query, searcher.search

    def one(text):
        terms = analyze(text)
        if not terms:
            return []
        query = Query.boolean_query([(Occur.Should, term_query(schema, "text", t, "freq"))
                                     for t in terms])
        return search(query, k, count=False).hits

    return one, lambda hit: searcher.doc(hit[1])["id"][0]
