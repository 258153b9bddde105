"""``cqa-search info INDEX``: what an index holds, and how stale each stored model is."""
from __future__ import annotations

import argparse

from .._utils import counted
from ..features import GIVEN_FEATURES, search_ranker_name
from ..index.live import index_info
from ..index.models import FAMILIES
from ..retrieval.bm25f import BM25F, DEFAULT_WEIGHTS
from ..retrieval.first_stage import DEFAULT_WEIGHT, ENCODER_WEIGHT
from ..searcher import default_retrieval
from ._common import COMMANDS, add_common_options, json_text, printable, run_command

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


def _first_stage(info) -> str:
    """What chooses the candidates of free searches (on a sharded index as on any other:
    its shards hold their rows of the word vectors)."""
    models = info["models"]
    kinds = {m["kind"] for m in models.values()}
    vectors = "the encoder's question vectors" if "encoder" in kinds else "the question vectors"
    name = "ranker"  # the ranker of free searches: its own, or its NAME-search
    if any(f in GIVEN_FEATURES for f in models.get(name, {}).get("features") or ()):
        name = search_ranker_name(name)
    ranker = models.get(name) if models.get(name, {}).get("kind") == "ranker" else None
    if ranker is not None and ranker.get("retrieval"):
        term = f"{ranker['retrieval']} (the model the ranker {name!r} was trained with)"
    elif isinstance(default_retrieval(info["fields"]), BM25F):
        term = ("bm25f (" + ", ".join(f"{k} {v:g}" for k, v in DEFAULT_WEIGHTS.items())
                + "; the default of an index with titles)")
    else:
        term = "bm25 (the default of an index without titles)"
    if not kinds & {"embeddings", "encoder"}:
        return (f"{term} alone (no word vectors: `cqa-search fit INDEX embeddings` adds the "
                "hybrid first stage)")
    stored = None if ranker is None else ranker.get("hybrid_weight")
    if stored == 0:
        return f"{term} alone (the ranker {name!r} was trained so: `train --hybrid none`)"
    default = ENCODER_WEIGHT if "encoder" in kinds else DEFAULT_WEIGHT
    a = default if stored is None else stored
    return (f"hybrid over {term}: (1-a) x its score / the best + a x cosine of {vectors}, "
            f"a = {a:g} (" + ("the default without a ranker that stores one" if stored is None
                          else f"chosen by `train`, stored with the ranker {name!r}") + ")")


def _refresh(path, name, kind) -> str:
    """The command that fits the model ``name`` of ``kind`` again (a family's options
    other than its name are as the user gave them before)."""
    if kind == "ranker":
        return f"cqa-search train {path} --queries Q --qrels R" + (
            f" --name {name}" if name != "ranker" else "")
    family = FAMILIES.get(kind)  # (a family's models are of its kind)
    if family is None:  # stored from Python (add_model)
        return f"cqa_search.index.models.add_model({str(path)!r}, {name!r}, fitted model)"
    named = "{" not in family.default_name and name == family.default_name
    return f"cqa-search fit {path} {kind}" + ("" if named else f" --name {name}")


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
    lines.append(f"first stage {_first_stage(info)}")
    for name, m in info["models"].items():
        stale = []
        if m["added_since"]:
            stale.append(f"{counted(m['added_since'], 'question')} added since")
        if m["deleted_since"]:
            stale.append(f"{m['deleted_since']:,} deleted since")
        if m.get("refitted_since"):
            stale.append(f"{' and '.join(m['refitted_since'])} fitted again since")
        again = f"{'retrain it' if m['kind'] == 'ranker' else 'refit'} with " \
            f"`{_refresh(info['path'], name, m['kind'])}`"
        lines.append(f"model      {name} ({m['kind']}, fitted {m['created']}): "
                     + ("; ".join(stale) + f" ({again})" if stale else "up to date")
                     + _ranks(name, m, info["models"]))
    return "\n".join(lines)


def run(args) -> int:
    info = index_info(args.index)
    print(json_text(info, indent=1) if args.json else printable(format_info(info)))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search info", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
