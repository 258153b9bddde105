"""The engine of an index's live generation, for a long-running server.

A writer (``cqa-search build-index``, ``fit``, ``train``) switches an index to a new
generation atomically (:mod:`cqa_search.index.store`). :class:`LiveIndex` follows it: a
background thread calls :meth:`SearchEngine.reopen` every ``interval`` seconds, prepares
the new engine (and what its presenter reads from disk) and then swaps it in. Requests
never wait for that: they keep the engine they got, whose files stay readable (open or
memory-mapped) after the writer removes its generation.
"""
from __future__ import annotations

import logging
import os
import threading

from ..engine import SearchEngine
from ..exceptions import CQASearchError, IndexFormatError
from ..presentation import Presenter

__all__ = ["LiveIndex"]

logger = logging.getLogger(__name__)

#: Seconds :meth:`LiveIndex.stop` waits for an opening under way (a large index with
#: ``verify`` reads every byte; stopping does not wait for it).
STOP_SECONDS = 5.0


class LiveIndex:
    """The current (engine, presenter) of the index at ``path``.

    Parameters
    ----------
    path : path
        The index directory; it need not exist yet (requests fail with
        :class:`IndexFormatError` until it does).
    interval : float, default 0.5
        Seconds between two checks for a new generation (one small file read).
    verify : bool, default False
        Check every file's SHA-256 when a generation is opened.
    config : SearchConfig, optional
        How the engines search (default: :class:`SearchConfig`'s defaults).
    titles : bool, default False
        Read the title keys of completion before serving a generation
        (:meth:`SearchEngine.prepare_completion
        <cqa_search.SearchEngine.prepare_completion>`: the HTTP server's page completes
        titles as a question is typed), not at its first completion.

    Attributes
    ----------
    error : str or None
        Why the index could not be (re)opened at the last attempt; the engine of the last
        good generation keeps serving meanwhile.
    """

    def __init__(self, path, *, interval=0.5, verify=False, config=None, titles=False):
        self.path = os.fspath(path)
        self.titles = titles
        self.interval = interval
        self.verify = verify
        self.config = config
        self.error = None
        self._state = None
        self._lock = threading.Lock()  # one opener at a time
        self._stop = threading.Event()
        self._thread = None

    def _prepared(self, engine):
        if self.titles:
            engine.prepare_completion()
        return engine, Presenter(engine).prepare()

    def current(self):
        """``(engine, presenter)`` of the last generation opened.

        Raises
        ------
        IndexFormatError
            No generation could be opened yet (no index, or an unreadable one).
        """
        state = self._state
        if state is not None:
            return state
        with self._lock:  # nothing to serve: open now rather than at the next check
            if self._state is None:
                self._state = self._open_first()
            return self._state

    def _open_first(self):
        try:
            # a sharded index's shards in Ray actors: they answer a server's requests in
            # parallel, on a cluster's nodes (RAY_ADDRESS) or on this machine's cores
            state = self._prepared(SearchEngine.open(self.path, verify=self.verify,
                                                     config=self.config, ray=True))
        except Exception as exc:  # noqa: BLE001 - served as 503, never a dead server
            self._failed(exc)
            raise IndexFormatError(self.error) from None
        self._recovered(state[0])
        return state

    def refresh(self) -> None:
        """Open the live generation if it is not the one served (what the background
        thread does every ``interval`` seconds). Any failure (a corrupted index, or a bug)
        is kept in :attr:`error`; the last good generation keeps serving."""
        with self._lock:
            state = self._state
            if state is None:
                try:
                    self._state = self._open_first()
                except IndexFormatError:
                    pass
                return
            try:
                engine = state[0].reopen()
                if engine is not state[0]:
                    self._state = self._prepared(engine)
                    logger.info("serving generation %s of %s (%d questions)",
                                engine.generation, self.path, engine.n_questions)
            except Exception as exc:  # noqa: BLE001 - a bug must not stop the following
                self._failed(exc)
                return
            self._recovered(self._state[0])

    def _failed(self, exc) -> None:
        if isinstance(exc, CQASearchError):
            message = str(exc)
        else:  # a bug: its traceback is logged (once per message), /health shows it
            message = f"internal error: {type(exc).__name__}: {exc}"
        if message != self.error:
            if not isinstance(exc, CQASearchError):
                logger.error("opening the index %s failed", self.path, exc_info=exc)
            logger.warning("cannot open the index: %s%s", message,
                           "" if self._state is None else
                           f" (still serving generation {self._state[0].generation})")
        self.error = message

    def _recovered(self, engine) -> None:
        if self.error is not None:
            logger.warning("serving generation %s of %s again", engine.generation, self.path)
        self.error = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.refresh()

    def start(self) -> None:
        """Open the index (if it can be) and follow its generations in the background."""
        self.refresh()
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="cqa-search-live-index",
                                            daemon=True)
            self._thread.start()

    def stop(self, timeout=STOP_SECONDS) -> None:
        """Stop following (the engine served stays), waiting at most ``timeout`` seconds
        for an opening under way (the thread is a daemon: it never holds the process)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                logger.warning("stopped without waiting for the opening of %s to end",
                               self.path)
            self._thread = None
