"""(ranking models: under construction.)"""

#: Model kind -> estimator class stored in an index (see cqa_search.features).
MODEL_KINDS = {}
