"""``cqa-search query INDEX [TEXT]``: search once, or interactively when TEXT is omitted."""
from __future__ import annotations

import argparse
import json
import os
import sys

from ..engine import SearchEngine
from ..exceptions import QueryError
from ..presentation import Presenter
from ..query_parser import parse_query
from ._common import (Style, add_common_options, format_explanation, format_hit, format_question,
                      run_command)

HELP = "search an index once, or interactively when no query text is given"

REPL_HELP = """\
Type a question to search. Commands:
  :k N              show N results (now {k})
  :category NAME    search only this category; ':category' alone clears it (now {category})
  :categories       list the categories of the index
  :show N           show result N of the last search in full, with all its answers
  :answers on|off   show the best answer under each result (now {answers})
  :explain on|off   show why each result ranks there (now {explain})
  :help             this help
  :quit             leave (also Ctrl-D)
Query syntax (one query at a time):
  renew work visa          any of the words, best matches first
  +visa renew              visa required        visa AND renew    both required
  -used  or  NOT used      leave out questions with "used"
  "reset button"           the words next to each other
  (visa OR permit) AND renew
  title:visa  body:visa  answers:passport  tag:family    the word in that part
  category:Travel  or  category:"Doha Shopping"           only that category\
"""


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    parser.add_argument("text", nargs="*", metavar="TEXT",
                        help="the question to search for (omit for an interactive session)")
    parser.add_argument("-k", type=int, default=10, help="number of results (default: 10)")
    parser.add_argument("--category", help="return only questions of this category")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--no-answers", dest="answers", action="store_false",
                        help="do not show the best answer of each result")
    parser.add_argument("--explain", action="store_true",
                        help="show each feature's contribution to a result's score (the "
                             "ranker's weights times the features; the feature scores when the "
                             "index has no ranker)")
    parser.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                        help="highlight matched words (default: on terminals)")
    add_common_options(parser)


def _print_results(presenter, results, style, *, answers, explain=False, out) -> None:
    if not len(results):
        print("no matching questions", file=out)
    for hit in results:
        print(format_hit(hit, presenter, results.query_terms, style, answer=answers), file=out)
        if explain:
            print(format_explanation(hit, presenter.engine, style), file=out)
    for word, options in presenter.suggestions(results).items():
        hint = f"; did you mean {' / '.join(options)}?" if options else ""
        print(style.dim(f"'{word}' is not in the archive{hint}"), file=out)


class _Session:
    """The interactive loop: reads lines, runs commands and queries."""

    def __init__(self, engine, args, style, out=None):
        self.engine, self.style = engine, style
        self.presenter = Presenter(engine)
        self.out = sys.stdout if out is None else out
        self.k, self.category, self.answers = args.k, args.category, args.answers
        self.explain = args.explain
        self.last = None

    def say(self, text=""):
        print(text, file=self.out)

    def command(self, line) -> bool:
        """Run a ``:command``; False to quit."""
        name, _, arg = line[1:].strip().partition(" ")
        arg = arg.strip()
        if name in ("q", "quit", "exit"):
            return False
        if name in ("h", "help", "?"):
            self.say(REPL_HELP.format(k=self.k, category=self.category or "all",
                                      answers="on" if self.answers else "off",
                                      explain="on" if self.explain else "off"))
        elif name == "k":
            if not arg.isdigit() or int(arg) < 1:
                self.say("usage: :k N (a positive number)")
            else:
                self.k = int(arg)
        elif name == "category":
            if arg:
                cid = self.engine.categories.id(arg.strip('"'))
                self.category = self.engine.categories[cid]
                self.say(f"searching only category {self.category!r}")
            else:
                self.category = None
                self.say("searching all categories")
        elif name == "categories":
            self.say(", ".join(sorted(self.engine.categories)) or "(this index has no categories)")
        elif name == "show":
            if self.last is None or not arg.isdigit() or not 1 <= int(arg) <= len(self.last):
                self.say("usage: :show N, with N a result number of the last search")
            else:
                self.say(format_question(self.last[int(arg) - 1].question, self.style))
        elif name in ("answers", "explain"):
            if arg not in ("on", "off"):
                self.say(f"usage: :{name} on|off")
            else:
                setattr(self, name, arg == "on")
        else:
            self.say(f"unknown command :{name}; type :help")
        return True

    def search(self, line) -> None:
        parsed = parse_query(line)
        category = parsed.category or self.category
        if not parsed.text.strip():
            self.say("type some words to search for (or :help)")
            return
        self.last = self.engine.search(parsed, k=self.k, category=category)
        _print_results(self.presenter, self.last, self.style, answers=self.answers,
                       explain=self.explain, out=self.out)

    def loop(self, stdin) -> None:
        interactive = stdin.isatty()
        history = _history() if interactive else None
        if interactive:
            self.say(f"{self.engine.n_docs:,} questions indexed. Type a question, or :help.")
        try:
            while True:
                try:
                    line = input("cqa> ") if interactive else stdin.readline()
                except EOFError:
                    break
                if not interactive and not line:
                    break
                line = line.strip()
                if not line:
                    continue
                try:
                    if line.startswith(":"):
                        if not self.command(line):
                            break
                    else:
                        self.search(line)
                except QueryError as exc:
                    self.say(f"error: {exc}")
        except KeyboardInterrupt:
            self.say()
        finally:
            if history:
                history()


def _history():
    """Enable line editing and a persistent history; returns the saver (or None)."""
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

    def save():
        try:
            readline.write_history_file(path)
        except OSError:
            pass
    return save


def run(args) -> int:
    if args.k < 1:
        raise QueryError(f"-k must be a positive integer; got {args.k}")
    engine = SearchEngine.open(args.index)
    style = Style("never" if args.json else args.color)
    if args.category is not None:
        engine.categories.id(args.category)  # fail early, with suggestions
    if not args.text:
        _Session(engine, args, style).loop(sys.stdin)
        return 0
    typed = " ".join(args.text)
    parsed = parse_query(typed)
    category = parsed.category or args.category
    if not parsed.text.strip():
        raise QueryError("empty query: type some words to search for")
    results = engine.search(parsed, k=args.k, category=category)
    presenter = Presenter(engine)
    if args.json:  # the document of the server's /api/search
        print(json.dumps(presenter.results_dict(results, typed=typed, category=category,
                                                explain=args.explain), ensure_ascii=False))
    else:
        _print_results(presenter, results, style, answers=args.answers, explain=args.explain,
                       out=sys.stdout)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search query", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
