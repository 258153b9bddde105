"""Evaluation: TREC run/qrels I/O, ranking metrics, significance tests."""
