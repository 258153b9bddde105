"""``cqa-search query INDEX [TEXT]``: search once, interactively, or a batch from stdin.

- ``cqa-search query INDEX "text"``: one search (``--json`` for one JSON document);
- ``cqa-search query INDEX`` on a terminal: an interactive session (``:help``);
- ``... | cqa-search query INDEX``: one query per line (``QID<TAB>text`` or text): results
  as text, or JSON lines with ``--json``, and a TREC run with ``--run-out``.
"""
from __future__ import annotations

import argparse
import os
import sys

from .._utils import counted
from ..engine import SearchConfig, SearchEngine
from ..evaluation.trec import check_writable, write_run
from ..exceptions import QueryError
from ..features import GIVEN_FEATURES, search_ranker_name
from ..presentation import MAX_K, Presenter
from ..query_parser import Filters
from ._common import (COMMANDS, HYBRID_HELP, Style, add_common_options,
                      add_field_weights_option, format_explanation, format_hit, format_question,
                      hybrid_weight, json_text, note_shards, positive_int, printable,
                      retrieval_model, run_command)

HELP = COMMANDS["query"][1]

COMMAND_NAMES = (":k", ":category", ":categories", ":show", ":like", ":answers", ":explain",
                 ":facets", ":help", ":quit")

REPL_HELP = """\
Type a question to search (Tab completes it with an archived title that begins so).
Commands (Tab completes them and category names):
  :k N              show N results, at most {max_k} (now {k})
  :category NAME    search only this category; ':category' alone clears it (now {category})
  :categories       the categories of the index, with their questions
  :show N           result N of the last search in full, with all its answers
  :like N or ID     the questions most similar to result N (or question ID)
  :answers on|off   show the best answer under each result (now {answers})
  :explain on|off   show why each result ranks there (now {explain})
  :facets on|off    show the categories and tags of the hits, with how many have each
                    (now {facets})
  :help             this help
  :quit             leave (also Ctrl-D; Ctrl-C clears the line or cancels a search)
{syntax}"""

SYNTAX_HELP = """\
Query syntax (one query at a time):
  renew work visa          any of the words, best matches first
  +visa renew              visa required        +visa +renew      both required
  -used                    leave out questions with "used"
  "reset button"           the words next to each other
  (visa OR permit) NOT work   visa or permit, and not work
  AND OR NOT               operators only next to other syntax (brackets, a field:,
                           a "phrase", +word, -word); in plain text they are words
                           ("I can NOT sleep" searches sleep)
  title:visa  body:visa  answers:passport  tags:family   the word in that part
  tag:machine-learning  -tag:java                         exactly this tag (or not)
  date:>=2014-01-01  date:2014  date:2014-01..2014-06     created then
  title:visa OR title:permit                              either
  visa^2  title:visa^2  (visa permit)^2                   weigh the word(s) 2 times
  category:Travel  or  category:"Doha Shopping"           only that category
  -category:Travel                                        all but that category
Each search prints the filters it applied, and notes what was not read as syntax.\
"""


def configure(parser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # the syntax's columns
    parser.epilog = SYNTAX_HELP
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    parser.add_argument("text", nargs="*", metavar="TEXT",
                        help="the question to search for, in the query syntax below (omit "
                             "for an interactive session, or pipe one query per line)")
    parser.add_argument("-k", type=positive_int, default=10,
                        help="number of results (default: 10; the interactive session shows "
                             f"at most {MAX_K})")
    parser.add_argument("--like", metavar="ID",
                        help="instead of TEXT: the questions most similar to the archived "
                             "question ID (more like this: its title and body searched, the "
                             "question itself left out)")
    parser.add_argument("--category", help="return only questions of this category")
    parser.add_argument("--tag", action="append", metavar="NAME",
                        help="only questions with this tag (exactly, ignoring case; as "
                             "tag:NAME; several --tag: all of them; with --like too)")
    parser.add_argument("--not-tag", action="append", metavar="NAME",
                        help="leave out questions with this tag (-tag:NAME)")
    parser.add_argument("--after", metavar="DATE",
                        help="only questions created on or after DATE (YYYY, YYYY-MM or "
                             "YYYY-MM-DD; as the query syntax's date:>=DATE; with --like "
                             "too)")
    parser.add_argument("--before", metavar="DATE",
                        help="only questions created before DATE (date:<DATE); --after 2014 "
                             "--before 2015: those of 2014")
    parser.add_argument("--ranker", metavar="NAME|none",
                        help="the stored ranker that orders the candidates (default: the "
                             "index's 'ranker' when it has one; 'none': the retrieval model's "
                             "order); one that reads the given-run features (train "
                             "--candidates) ranks with its NAME-search")
    parser.add_argument("--hybrid", type=hybrid_weight, default="auto", metavar="A|none",
                        help=HYBRID_HELP)
    add_field_weights_option(parser)
    parser.add_argument("--json", action="store_true",
                        help="print results as JSON (one line per query when piped)")
    parser.add_argument("--run-out", metavar="FILE",
                        help="also write the results of piped queries as a TREC run")
    parser.add_argument("--facets", action="store_true",
                        help="also print the hits' categories and tags with how many hits "
                             "have each (the JSON has them always: facets)")
    parser.add_argument("--no-answers", dest="answers", action="store_false",
                        help="do not show the best answer of each result")
    parser.add_argument("--explain", action="store_true",
                        help="show each feature's contribution to a result's score (the "
                             "ranker's weights times the features; the feature scores when the "
                             "index has no ranker), and the two parts of its hybrid first-"
                             "stage score")
    parser.add_argument("--verify", action="store_true",
                        help="check every file of the index against its checksum first")
    parser.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                        help="highlight matched words (default: on terminals)")
    add_common_options(parser)


def open_engine(args, *, given=False, **config) -> SearchEngine:
    """The engine of ``args.index`` with ``--ranker NAME|none`` (and ``--verify``) applied;
    a ranker asked for by name must exist and fit what is searched (free searches, or
    ``given``: candidates given with scores)."""
    if args.ranker is not None:
        config["ranker"] = None if args.ranker.lower() == "none" else args.ranker
    config.setdefault("hybrid", getattr(args, "hybrid", "auto"))
    if getattr(args, "field_weights", None) is not None:
        config.setdefault("retrieval", retrieval_model(weights=args.field_weights))
    note_shards(args.index)
    engine = SearchEngine.open(args.index, verify=getattr(args, "verify", False),
                               config=SearchConfig(**config))
    if args.ranker and args.ranker.lower() != "none" and \
            (engine.given_ranker if given else engine.ranker) is None:
        if engine.given_ranker is not None:
            raise QueryError(
                f"ranker {args.ranker!r} reads the given-run features ("
                f"{', '.join(GIVEN_FEATURES)}), which only candidates given with scores have "
                f"(`evaluate --candidates RUN`), and this index has no "
                f"{search_ranker_name(args.ranker)!r} for free searches (train it again with "
                "--candidates to store one, or search with --ranker none)")
        rankers = [n for n, m in engine.models.items() if hasattr(m, "predict")]
        raise QueryError(f"this index has no ranker {args.ranker!r} (rankers: "
                         f"{', '.join(rankers) or 'none'})")
    return engine


#: Why a query without any term found nothing (the search page says the same).
NOTHING_TO_SEARCH = ("no words to search for (the index leaves out its stopwords, very common "
                     "words, and words too short to index)")


def _facets_lines(presenter, results, style) -> list:
    """The facets of the hits (:meth:`~cqa_search.presentation.Presenter.facets`) as lines:
    ``categories of the 10 hits: Travel 6 · Visas 4``."""
    facets = presenter.facets(results)
    return [style.dim(f"{what} of the {counted(len(results), 'hit')}: ") + printable(
        " · ".join(f"{f['name']} {f['count']}" for f in facets[what]))
        for what in ("categories", "tags") if facets[what]]


def _print_results(presenter, results, style, *, answers, explain=False, facets=False,
                   out) -> None:
    parsed = results.parsed
    if parsed is not None:
        for notice in parsed.notices:
            print(style.dim(f"note: {printable(notice)}"), file=out)
        filters = parsed.filters()
        if filters:
            print(style.dim("filters: " + printable(" ".join(filters))), file=out)
    if results.relaxed:
        print(style.dim("no question has every required word or phrase; questions with the "
                        "words:"), file=out)
    if results.field == "answers":
        print(style.dim("no question holds these words; questions whose answers do:"),
              file=out)
    if not len(results):
        print("no matching questions" + ("" if results.query_terms or results.unknown_words
                                         else f": {NOTHING_TO_SEARCH}"), file=out)
    for hit in results:
        print(format_hit(hit, presenter, results.query_terms, style, answer=answers), file=out)
        if explain:
            print(format_explanation(hit, presenter.engine, style), file=out)
    for word, options in presenter.suggestions(results).items():
        hint = f"; did you mean {' / '.join(options)}?" if options else ""
        print(style.dim(printable(f"'{word}' is not in the archive{hint}")), file=out)
    if facets:
        for line in _facets_lines(presenter, results, style):
            print(line, file=out)


def _like_header(engine, doc_id, style) -> str:
    question = engine.archive.get(doc_id)
    return style.dim(f"questions like {printable(doc_id)}: ") + printable(
        question.title or question.body[:80])


def results_json(presenter, results, *, qid=None, typed=None, explain=False,
                 like=None) -> str:
    """One query's results as a JSON document (one line): the server's ``/api/search``
    document (:meth:`~cqa_search.presentation.Presenter.results_dict`), with ``qid`` first
    for queries read from standard input, ``like`` first for ``--like ID``."""
    doc = presenter.results_dict(results, typed=typed, explain=explain)
    if qid is not None:
        doc = {"qid": qid, **doc}
    if like is not None:
        doc = {"like": like, **doc}
    return json_text(doc)


class _Session:
    """The interactive loop: reads lines, runs commands and queries."""

    def __init__(self, engine, args, style, out=None):
        self.engine, self.style = engine, style
        self.presenter = Presenter(engine)
        self.out = sys.stdout if out is None else out
        self.category, self.answers = args.category, args.answers
        self.k = self.capped(args.k)
        self.filters = {"after": args.after, "before": args.before, "tags": args.tag,
                        "not_tags": args.not_tag}
        self.explain, self.facets = args.explain, args.facets
        self.last = None

    def say(self, text=""):
        print(text, file=self.out)

    def capped(self, k) -> int:
        """``k``, at most :data:`~cqa_search.presentation.MAX_K` (said when it is more)."""
        if k > MAX_K:
            self.say(f"k capped at {MAX_K}, the most a search shows here; for more, pipe the "
                     "queries to `cqa-search query INDEX -k N`")
        return min(k, MAX_K)

    @property
    def prompt(self) -> str:
        return f"cqa [{printable(self.category)}]> " if self.category else "cqa> "

    def complete(self, line) -> list:
        """Completions of a whole input line (commands, category names; a question: the
        archived titles that begin so, :meth:`~cqa_search.SearchEngine.complete`)."""
        if not line.startswith(":"):
            if len(line.strip()) < 3:
                return []
            return list(dict.fromkeys(c.title for c in self.engine.complete(line, k=10)
                                      if printable(c.title) == c.title))
        name, space, arg = line.partition(" ")
        if not space:
            return [c + " " for c in COMMAND_NAMES if c.startswith(name)]
        if name == ":category":  # (readline lists them raw: none with control characters)
            folded = arg.casefold()
            return [f"{name} {c}" for c in sorted(self.engine.categories.present())
                    if c.casefold().startswith(folded) and printable(c) == c]
        if name in (":answers", ":explain", ":facets"):
            return [f"{name} {v}" for v in ("on", "off") if v.startswith(arg)]
        return []

    def categories_table(self) -> str:
        cats = self.engine.categories
        if not len(cats):
            return "(this index has no categories)"
        rows = list(self.engine.category_counts().items())
        if not rows:
            return "(no question of this index has a category now)"
        width = max(len(name) for name, _ in rows)
        lines = [printable(f"  {name:<{width}}  {n:>7,}") for name, n in rows]
        return "\n".join([f"  {'category':<{width}}  {'questions':>7}"] + lines)

    def command(self, line) -> bool:
        """Run a ``:command``; False to quit."""
        name, _, arg = line[1:].strip().partition(" ")
        arg = arg.strip()
        if name in ("q", "quit", "exit"):
            return False
        if name in ("h", "help", "?"):
            self.say(REPL_HELP.format(k=self.k, category=self.category or "all",
                                      answers="on" if self.answers else "off",
                                      explain="on" if self.explain else "off",
                                      facets="on" if self.facets else "off",
                                      syntax=SYNTAX_HELP, max_k=MAX_K))
        elif name == "k":
            if not (arg.isascii() and arg.isdigit()) or int(arg) < 1:
                self.say("usage: :k N (a positive number)")
            else:
                self.k = self.capped(int(arg))
        elif name == "category":
            if arg:
                cid = self.engine.categories.id(arg.strip('"'))
                self.category = self.engine.categories[cid]
                self.say(f"searching only category {self.category!r}")
            else:
                self.category = None
                self.say("searching all categories")
        elif name == "categories":
            self.say(self.categories_table())
        elif name == "show":
            if self.last is None or not (arg.isascii() and arg.isdigit()) \
                    or not 1 <= int(arg) <= len(self.last):
                self.say("usage: :show N, with N a result number of the last search")
            else:
                self.say(format_question(self.last[int(arg) - 1].question, self.style))
        elif name == "like":
            if not arg:
                self.say("usage: :like N (a result of the last search) or :like ID")
                return True
            doc_id = arg
            if self.last is not None and arg.isascii() and arg.isdigit() \
                    and 1 <= int(arg) <= len(self.last):
                doc_id = self.last.doc_ids[int(arg) - 1]
            self.last = self.engine.similar(doc_id, k=self.k, category=self.category,
                                            **self.filters)
            self.say(_like_header(self.engine, doc_id, self.style))
            _print_results(self.presenter, self.last, self.style, answers=self.answers,
                           explain=self.explain, facets=self.facets, out=self.out)
        elif name in ("answers", "explain", "facets"):
            if arg not in ("on", "off"):
                self.say(f"usage: :{name} on|off")
            else:
                setattr(self, name, arg == "on")
        else:
            self.say(f"unknown command :{printable(name)}; type :help")
        return True

    def search(self, line) -> None:
        self.last = self.engine.search(line, k=self.k, category=self.category,
                                       **self.filters)
        searched = self.last.category
        if self.category is not None and searched is not None and \
                searched.casefold() != self.category.casefold():
            self.say(self.style.dim(printable(f"in {searched}: the query's category: wins "
                                              f"over :category {self.category}")))
        _print_results(self.presenter, self.last, self.style, answers=self.answers,
                       explain=self.explain, facets=self.facets, out=self.out)

    def handle(self, line) -> bool:
        """One input line; False to quit. A query's error is reported and the session
        goes on."""
        line = line.strip()
        if not line:
            return True
        try:
            if line.startswith(":"):
                return self.command(line)
            self.search(line)
        except QueryError as exc:
            self.say(f"error: {printable(exc)}")
        return True

    def loop(self, stdin) -> None:
        history = _readline(self)
        self.say(f"{self.engine.n_questions:,} questions indexed. Type a question, or :help.")
        warned = False
        try:
            while True:
                try:
                    line = input(self.prompt) if stdin is sys.stdin else stdin.readline()
                except KeyboardInterrupt:  # clears the line, as in a shell
                    self.say("^C" if warned else "^C  (:quit or Ctrl-D to leave)")
                    warned = True
                    continue
                except EOFError:
                    self.say()
                    break
                if stdin is not sys.stdin and not line:
                    break
                try:
                    if not self.handle(line):
                        break
                except KeyboardInterrupt:  # cancels the search; the session goes on
                    self.say("  search cancelled")
                    warned = True
        finally:
            if history:
                history()


def _readline(session):
    """Line editing, Tab completion and a persistent history; returns the saver."""
    try:
        import readline
    except ImportError:
        return None
    path = os.path.join(os.path.expanduser("~"), ".cqa_search_history")
    try:
        readline.read_history_file(path)
    except OSError:
        pass
    readline.set_history_length(1000)
    readline.set_completer_delims("")  # complete whole lines: category names have spaces
    matches = []

    def completer(text, state):
        if state == 0:
            matches[:] = session.complete(readline.get_line_buffer())
        return matches[state] if state < len(matches) else None
    readline.set_completer(completer)
    readline.parse_and_bind("tab: complete")

    def save():
        try:
            readline.write_history_file(path)
        except OSError:
            pass
    return save


def _filters(args) -> dict:
    """The filter options as keyword arguments of a search or more-like-this."""
    return {"category": args.category, "after": args.after, "before": args.before,
            "tags": args.tag, "not_tags": args.not_tag}


def _batch(engine, args, style, stdin) -> int:
    """One query per input line (``QID<TAB>text`` or text); text or JSON lines out."""
    presenter = Presenter(engine)
    if args.run_out:
        check_writable(args.run_out)  # before the searching
    run, n, errors, seen = {}, 0, 0, {}
    for number, line in enumerate(stdin, start=1):
        line = line.rstrip("\n")
        if not line.strip():
            continue
        qid, tab, text = line.partition("\t")
        if not tab or not qid.strip():
            qid, text = str(number), text if tab else line
        n += 1
        try:
            if any(c.isspace() for c in qid):
                raise QueryError(f"a query id has no white space; got {qid!r} (line {number})")
            if qid in seen:
                raise QueryError(f"query id {qid!r} of line {number} was given on line "
                                 f"{seen[qid]}")
            seen[qid] = number
            results = engine.search(text, k=args.k, **_filters(args))
        except QueryError as exc:
            errors += 1
            if args.json:
                print(json_text({"qid": qid, "query": text, "error": str(exc)}))
            else:
                print(printable(f"query {qid}: error: {exc}"), file=sys.stderr)
            continue
        run[qid] = dict(zip(results.doc_ids, results.scores.tolist()))
        if args.json:
            print(results_json(presenter, results, qid=qid, typed=text,
                               explain=args.explain))
        else:
            print(style.bold(printable(f"query {qid}: {text}")))
            _print_results(presenter, results, style, answers=args.answers,
                           explain=args.explain, facets=args.facets, out=sys.stdout)
            print()
    if args.run_out:
        write_run(run, args.run_out, tag="cqa-search")
    print(f"{counted(n, 'query')} searched" + (f", {errors:,} refused" if errors else "")
          + (f"; run written to {args.run_out}" if args.run_out else ""), file=sys.stderr)
    return 1 if errors and errors == n else 0


def run(args) -> int:
    engine = open_engine(args)
    style = Style("never" if args.json else args.color)
    if args.category is not None:
        engine.categories.id(args.category)  # fail early, with suggestions
    Filters(after=args.after, before=args.before, tags=args.tag,
            not_tags=args.not_tag)  # checked before any search
    if not args.text and args.like is None:
        if sys.stdin.isatty():
            if args.run_out or args.json:
                raise QueryError(f"{'--run-out' if args.run_out else '--json'} applies to "
                                 "queries given as text or on standard input, not to the "
                                 "interactive session")
            _Session(engine, args, style).loop(sys.stdin)
            return 0
        return _batch(engine, args, style, sys.stdin)
    if args.run_out:
        raise QueryError("--run-out applies to queries given on standard input")
    presenter = Presenter(engine)
    typed = " ".join(args.text)
    if args.like is not None:
        if typed:
            raise QueryError("give either the query TEXT or --like ID, not both")
        results, typed = engine.similar(args.like, k=args.k, **_filters(args)), None
    else:
        results = engine.search(typed, k=args.k, **_filters(args))
    if args.json:
        print(results_json(presenter, results, typed=typed, explain=args.explain,
                           like=args.like))
    else:
        if args.like is not None:
            print(_like_header(engine, args.like, style))
        _print_results(presenter, results, style, answers=args.answers, explain=args.explain,
                       facets=args.facets, out=sys.stdout)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search query", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
