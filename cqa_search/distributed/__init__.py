"""Scale-out on Ray: sharded indexes, fan-out search and distributed model fitting.

An archive too large for one machine is split into *shards*, contiguous parts of the
archive in order, each a normal cqa_search index, under one index directory whose
top-level generation holds what the shards share (:mod:`.build`)::

    cqa-search build-index ARCHIVE... -o DIR --shards N [--ray ADDRESS]

:meth:`cqa_search.SearchEngine.open` on such a directory gives the engine of any index
with a :class:`~.search.ShardedSearcher` as its back-end: each call sent to one Ray actor
per shard (holding its shard memory-mapped and the collection's global statistics), or
to the shards read in this process when it is not on Ray (a one-shot command:
:func:`._ray.runs_on_ray`), their answers merged, the ranker applied on the driver, so
results equal those of one index of the whole archive (:mod:`.search`).

Model fitting parallelised over Ray tasks (the IBM Model 1 E-step over shards of the
training pairs, the per-category blocks of GNMFNC) and where a sharded index's shards are
(the translation model's corpus, the answers model's parts, an actor per shard) is
:mod:`.fitting`; compacting a sharded index's shards as Ray tasks is
:func:`cqa_search.index.sharded_writer.compact_shard` run by :func:`._ray.run_tasks`.

Ray is an optional dependency (``pip install 'cqa-search[distributed]'``), imported only
here and only when used (:mod:`._ray`).
"""
