"""``cqa-search info INDEX``: what an index holds, and how stale each stored model is."""
from __future__ import annotations

import argparse
import json

from .._utils import counted
from ..features import GIVEN_FEATURES, search_ranker_name
from ..index.live import index_info
from ._common import COMMANDS, add_common_options, run_command

HELP = COMMANDS["info"][1]


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    parser.add_argument("--json", action="store_true", help="print the information as JSON")
    add_common_options(parser)


def _ranks(name, model, models) -> str:
    """What a ranker of the given-run features ranks (nothing to say of the others)."""
    if not any(f in GIVEN_FEATURES for f in model.get("features") or ()):
        return ""
    search = search_ranker_name(name)
    return ("; ranks candidates given with their scores (free searches: "
            + (f"{search})" if search in models else "the retrieval order)"))


def format_info(info) -> str:
    segments = info["segments"]
    deleted = sum(s["deleted"] for s in segments)
    lines = [f"index      {info['path']} (generation {info['generation']}, "
             f"{info['created']}, format {info['format_version']})",
             f"questions  {info['questions']:,}" + (f" ({deleted:,} deleted rows until "
                                                    "`cqa-search compact`)" if deleted else ""),
             f"shards     {len(info['shards'])}: " + ", ".join(
                 f"{s['dir'] or '(empty)'} {counted(s['questions'], 'question')}"
                 for s in info["shards"]) if info["shards"] else
             f"segments   {len(segments)}: " + ", ".join(
                 f"{s['name']} {counted(s['rows'], 'row')}" + (f" ({s['deleted']:,} deleted)"
                                                      if s["deleted"] else "")
                 for s in segments),
             f"vocabulary {info['terms']:,} terms; fields {', '.join(info['fields'])}",
             f"categories {info['categories']:,}"]
    if not info["models"]:
        lines.append("models     none (train them with `cqa-search fit` and `cqa-search train`)")
    for name, m in info["models"].items():
        stale = []
        if m["added_since"]:
            stale.append(f"{counted(m['added_since'], 'question')} added since")
        if m["deleted_since"]:
            stale.append(f"{m['deleted_since']:,} deleted since")
        again = "retrain it with `cqa-search train`" if m["kind"] == "ranker" else \
            "refit with `cqa-search fit`"
        lines.append(f"model      {name} ({m['kind']}, fitted {m['created']}): "
                     + ("; ".join(stale) + f" ({again})" if stale else "up to date")
                     + _ranks(name, m, info["models"]))
    return "\n".join(lines)


def run(args) -> int:
    info = index_info(args.index)
    print(json.dumps(info, ensure_ascii=False, indent=1) if args.json
                  else format_info(info))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search info", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
