"""Evaluation: ranking metrics, significance tests, TREC run/qrels/query files."""
from .metrics import (CONVENTIONS, evaluate, judged_only, parse_metric, protocol_convention,
                      summarize)
from .runs import feature_table, run_of_scores, run_queries
from .significance import compare, paired_interval, paired_ttest, randomization_test
from .trec import (rank_documents, read_qrels, read_queries, read_run, write_qrels,
                   write_queries, write_run, write_svmrank)

__all__ = ["CONVENTIONS", "evaluate", "protocol_convention", "summarize", "parse_metric",
           "rank_documents",
           "judged_only", "compare", "paired_interval",
           "paired_ttest", "randomization_test", "read_qrels", "write_qrels", "read_run",
           "write_run", "read_queries", "write_queries", "write_svmrank", "run_queries",
           "feature_table", "run_of_scores"]
