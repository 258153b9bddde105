"""The index directory: generations, a versioned manifest, checksummed files, atomic commits.

An index is a directory of *generations*, each a complete, immutable snapshot::

    my_index/
      CURRENT                  the name of the live generation, e.g. "gen-000007"
      gen-000007/              the live generation
        manifest.json          format_version, package version, analyzer, segments, stats,
                               models, files + sizes + sha256
        vocab.json  categories.json  surface.json  doc_id_rank.npy
        stats/<field>/         collection statistics of the live rows
        segments/seg-NNNNNN/   the questions, ids, categories and postings of one segment
        models/<name>/         a trained model: model.json + its arrays (.npy)
        shards/00000/ ...      (a sharded index, instead of segments) each shard a whole
                               index directory (:mod:`cqa_search.index.sharding`)
      gen-000006/              the previous generation, kept for readers still opening it
      .lock                    taken by writers while they switch generations
      .tmp-*/                  a generation being written (never read)

:mod:`cqa_search.index.layout` is the one description of the files of a generation (what
each holds, how it is written and read back); this module knows only that they are files.
Only ``.npy`` (loaded with ``allow_pickle=False``) and UTF-8 JSON/JSONL are used, so
opening an index never runs code.

Writing (:class:`IndexWriter`): new files go into a ``.tmp-*`` directory; files kept from
the live generation (an added model keeps the term index) are hard-linked into it, never
modified; the manifest is written last, the directory renamed to the next generation and
``CURRENT`` replaced by one ``rename``: the single atomic step that switches readers to it.
A crash at any point leaves the previous generation live; the leftovers (a temporary
directory, a generation never made current) are removed by the next writer. Writers
serialise their switch on ``.lock`` and build on the generation that is live at that
moment, so two concurrent writers (say, two ``cqa-search fit``) both land. An index inside
a generation being made (a shard of a sharded index) is written by a nested writer
(:meth:`IndexWriter.nested`), which takes no lock (no other writer reaches it), and
becomes part of that generation (:meth:`IndexWriter.add_index`).

Reading (:func:`open_index`): ``CURRENT`` is read once and every file comes from that
generation, so a reader sees one consistent snapshot. Generations older than the previous
one are deleted; a reader that raced two switches retries (:func:`read_consistent`).
Files already opened (memory-mapped) stay readable after deletion.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import stat
import time

import numpy as np
import orjson

from .._utils import file_sha256 as _sha256
from .._version import __version__
from ..exceptions import IndexFormatError, IndexNotFoundError, rebuild_hint

__all__ = ["FORMAT_VERSION", "MANIFEST", "CURRENT", "IndexWriter", "StoredIndex",
           "StoredModel", "open_index", "is_compatible", "verify_index", "read_consistent",
           "current_generation", "is_live", "rollback", "damage_advice"]

logger = logging.getLogger(__name__)

#: Version of the on-disk layout; bumped whenever an older reader would misread it (4: a
#: sharded index keeps its statistics in ``stats/<field>/`` as any index, and its shards
#: their rows of the per-question models).
FORMAT_VERSION = 4
#: Older versions still read: an unsharded index of format 3 is laid out as one of 4.
READABLE = (3,)
MANIFEST = "manifest.json"
CURRENT = "CURRENT"
_LOCK = ".lock"
_OWNER = ".owner"
_FORMAT_NAME = "cqa_search-index"
_GENERATION = re.compile(r"gen-(\d{6,})\Z")
_TMP_PREFIX = ".tmp-"
# A temporary directory without an owner lock is a writer's that has not taken its lock
# yet (a few microseconds) or a writer's that died: removed only when this old.
_ORPHAN_SECONDS = 60.0
# How often a reader re-reads CURRENT when the generation it chose vanished under it.
_OPEN_ATTEMPTS = 5
# Largest CURRENT and manifest.json read (a manifest lists every file: ~150 bytes each).
_CURRENT_BYTES = 64
_MANIFEST_BYTES = 64 << 20


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _fsync_dir(path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _is_ours(name) -> bool:
    """True for the entries a cqa_search index directory may hold."""
    return (name in (CURRENT, _LOCK) or name.startswith(_TMP_PREFIX)
            or name.startswith(CURRENT + ".") or _GENERATION.match(name) is not None)


def damage_advice(path, relpath) -> str:
    """What to do about the damaged file ``relpath`` of the index at ``path``: for a model's
    file, go back to the previous generation or fit that model again (the questions are
    sound: no rebuild); for another file, a rebuild or the previous generation."""
    parts = relpath.split("/")
    if parts[0] == "models" and len(parts) > 1:
        return (f"the file belongs to model {parts[1]!r}, not to the questions (no rebuild "
                f"needed): `cqa-search remove-model {path} {parts[1]}` drops that model (then "
                f"fit or train it again), or `cqa-search rollback {path}` goes back to the "
                "previous generation")
    return (f"{rebuild_hint()}, or `cqa-search rollback {path}` to go back to the previous "
            "generation")


def _regular(full, index, name, inside=None) -> int:
    """A descriptor of ``full`` (``name`` within the index directory ``index``), opened only
    when it is a regular file inside the index: a symbolic link (the writers make none), a
    directory on its path that leads out of the index (a generation directory linked to
    another folder), a FIFO (whose open would wait for a writer), a device (endless bytes)
    or a directory is a corrupted index. FileNotFoundError is raised as it is (the
    generation may have been removed by a writer: the reader retries). ``inside``: a dict
    that keeps the directories found inside the index, for the files of one generation."""
    inside = {} if inside is None else inside
    directory = os.path.dirname(full)
    if directory not in inside:
        root = inside.get(None) or inside.setdefault(None, os.path.realpath(index))
        real = os.path.realpath(directory)
        inside[directory] = os.path.commonpath([real, root]) == root
    if not inside[directory]:
        raise IndexFormatError(f"corrupted index {index}: {name} leads out of the index (to "
                               f"{os.path.realpath(full)}); {rebuild_hint()}")
    # O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise IndexFormatError(f"corrupted index {index}: {name} is a symbolic link (to "
                               f"{os.path.realpath(full)}); {rebuild_hint()}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket")
        raise IndexFormatError(f"corrupted index {index}: {name} is {kind}, not a regular "
                               f"file; {rebuild_hint()}")
    return fd


def _read_file(full, index, name, limit, inside=None) -> bytes:
    """The bytes of the regular file ``full`` inside ``index`` (see :func:`_regular`),
    refused when it holds more than ``limit`` bytes (read no further)."""
    with os.fdopen(_regular(full, index, name, inside), "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise IndexFormatError(f"corrupted index {index}: {name} has more than {limit:,} bytes"
                               f"; {rebuild_hint()}")
    return data


def current_generation(path) -> str | None:
    """Name of the live generation of the index at ``path``, None when it has none.

    Raises
    ------
    IndexFormatError
        ``CURRENT`` is unreadable or names no generation.
    """
    path = os.fspath(path)
    try:
        raw = _read_file(os.path.join(path, CURRENT), path, CURRENT, _CURRENT_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IndexFormatError(f"cannot read the index {path}: {exc.strerror}") from None
    name = raw.decode("ascii", "replace").strip()
    if not _GENERATION.match(name):
        raise IndexFormatError(f"corrupted index {path}: {CURRENT} names no "
                               f"generation ({raw[:20]!r}); {rebuild_hint()}")
    return name


def _locate(path) -> tuple:
    """(index directory, live generation name), or IndexFormatError saying what is there."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise IndexNotFoundError(f"no index at {path} (build one with `cqa-search "
                                 "build-index`)")
    if not os.path.isdir(path):
        raise IndexFormatError(f"{path} is a file, not an index directory")
    generation = current_generation(path)
    if generation is not None:
        return path, generation
    if os.path.isfile(os.path.join(path, MANIFEST)):  # the layout of format versions 1-2
        try:
            old = json.loads(_read_file(os.path.join(path, MANIFEST), path, MANIFEST,
                                        _MANIFEST_BYTES))
        except (OSError, ValueError, IndexFormatError):
            old = {}
        parent = os.path.dirname(os.path.abspath(path))
        if _GENERATION.match(os.path.basename(os.path.abspath(path))) and \
                os.path.isfile(os.path.join(parent, CURRENT)):
            raise IndexFormatError(f"{path} is one generation of the index {parent}: open "
                                   "the index directory itself")
        if isinstance(old, dict) and old.get("format") == _FORMAT_NAME:
            raise _version_refusal(path, old.get("format_version"))
        raise IndexFormatError(f"{path} is not a cqa_search index ({MANIFEST} is foreign)")
    try:
        entries = os.listdir(path)
    except OSError as exc:
        raise IndexFormatError(f"cannot read the index {path}: {exc.strerror}") from None
    if entries and all(_is_ours(e) for e in entries):
        raise IndexNotFoundError(f"no index at {path} yet: its first build did not finish "
                                 "(run `cqa-search build-index` again)")
    raise IndexFormatError(f"{path} is not a cqa_search index (it has no {CURRENT})")


def is_live(stored) -> bool:
    """Whether ``stored`` is still the live generation of its index: CURRENT names it and
    its manifest is the one read (an index deleted and built again numbers its
    generations from gen-000001 again).

    Raises
    ------
    IndexFormatError
        ``CURRENT`` or the manifest is unreadable.
    """
    if current_generation(stored.path) != stored.generation:
        return False
    try:
        return _read_manifest(stored.path, stored.generation) == stored.manifest
    except FileNotFoundError:
        return False


def _version_refusal(path, version) -> IndexFormatError:
    """The error of an index whose format version this code does not read: what it reads,
    and the way out (a newer cqa_search for a newer index, else a rebuild)."""
    reads = f"version {FORMAT_VERSION}" + "".join(f" (and {v} for an unsharded index)"
                                                   for v in READABLE)
    newer = isinstance(version, int) and version > FORMAT_VERSION
    return IndexFormatError(
        f"{path} has index format version {version}, but this cqa_search {__version__} "
        f"reads {reads}: " + ("a newer cqa_search wrote it: upgrade cqa_search, or "
                              if newer else "") + rebuild_hint())


def _read_manifest(path, generation) -> dict:
    name = f"{generation}/{MANIFEST}"
    try:
        manifest = json.loads(_read_file(os.path.join(path, name), path, name,
                                         _MANIFEST_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise  # the generation vanished: the caller may retry with the new CURRENT
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise IndexFormatError(f"corrupted index {path}: unreadable {generation}/{MANIFEST} "
                               f"({exc}); {rebuild_hint()}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT_NAME:
        raise IndexFormatError(f"{path} is not a cqa_search index ({MANIFEST} is foreign)")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION and not (version in READABLE and "shards" not in manifest):
        raise _version_refusal(path, version)
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(
            isinstance(info, dict) and isinstance(info.get("bytes"), int)
            and isinstance(info.get("sha256"), str) for info in files.values()):
        raise IndexFormatError(f"corrupted index {path}: the file list of its {MANIFEST} is "
                               f"malformed; {rebuild_hint()}")
    return manifest


def is_compatible(path) -> bool:
    """Cheap probe: True when ``path`` holds an index this version can open."""
    try:
        path, generation = _locate(path)
        _read_manifest(path, generation)
        return True
    except (IndexFormatError, OSError):
        return False


class StoredIndex:
    """One generation of an index directory: its manifest and typed access to its files.

    Use :func:`open_index` to create one.

    Attributes
    ----------
    path : str
        The index directory.
    generation : str
        The generation read (e.g. ``"gen-000007"``); every file comes from it.
    manifest : dict
    """

    def __init__(self, path, generation, manifest, mmap, verified=False):
        self.path = os.fspath(path)
        self.generation = generation
        self.root = os.path.join(self.path, generation)
        self.manifest = manifest
        self.mmap = mmap
        self.verified = verified
        self._inside = {}  # directories found inside the index (see _regular)

    def file(self, relpath) -> str:
        """Absolute path of a file listed in the manifest."""
        if relpath not in self.manifest["files"]:
            raise IndexFormatError(f"corrupted index {self.path}: {relpath} is not in its "
                                   f"manifest; {rebuild_hint()}")
        return os.path.join(self.root, relpath)

    def has(self, relpath) -> bool:
        return relpath in self.manifest["files"]

    def array(self, relpath) -> np.ndarray:
        """A stored array (memory-mapped read-only when the index was opened with mmap)."""
        try:
            # a plain view of the memory map: slicing an np.memmap costs ~10 us more
            return np.asarray(np.load(self.file(relpath), mmap_mode="r" if self.mmap else None,
                                      allow_pickle=False))
        except FileNotFoundError:
            raise
        except Exception as exc:  # noqa: BLE001 - numpy reads a damaged header in many ways
            if isinstance(exc, IndexFormatError):
                raise
            raise IndexFormatError(f"corrupted index {self.path}: cannot read {relpath} "
                                   f"({exc}); {damage_advice(self.path, relpath)}") from None

    def json(self, relpath):
        """A stored JSON document."""
        try:
            data = _read_file(self.file(relpath), self.path, f"{self.generation}/{relpath}",
                              self.manifest["files"][relpath]["bytes"], self._inside)
            try:  # orjson reads the long lists (ids, vocabulary) 2-3x faster
                return orjson.loads(data)
            except orjson.JSONDecodeError:  # NaN, huge integers: only json reads them
                return json.loads(data.decode("utf-8"))
        except FileNotFoundError:
            raise
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise IndexFormatError(f"corrupted index {self.path}: cannot read {relpath} "
                                   f"({exc}); {damage_advice(self.path, relpath)}") from None

    @property
    def models(self) -> dict:
        """Model name -> its manifest entry (``kind``, ``dir``, ``created``, ...)."""
        models = self.manifest.get("models", {})
        self.check(isinstance(models, dict) and all(
            isinstance(e, dict) and isinstance(e.get("kind"), str)
            and isinstance(e.get("dir"), str) for e in models.values()),
            f"the model list of its {MANIFEST} is malformed")
        return models

    def model(self, name) -> "StoredModel":
        """A stored model's kind, parameters, learned metadata and (lazy) arrays."""
        entry = self.models.get(name)
        if entry is None:
            raise IndexFormatError(f"{self.path} has no model {name!r} (models: "
                                   f"{', '.join(self.models) or 'none'})")
        doc = self.json(f"{entry['dir']}/model.json")
        self.check(isinstance(doc, dict) and isinstance(doc.get("params", {}), dict)
                   and isinstance(doc.get("meta", {}), dict)
                   and isinstance(doc.get("arrays", []), list),
                   f"model {name!r} has a malformed model.json")
        return StoredModel(self, name, entry["kind"], doc.get("params", {}), doc.get("meta", {}),
                           entry["dir"], tuple(doc.get("arrays", ())))

    def check(self, condition, what) -> None:
        """Raise IndexFormatError unless ``condition`` (a consistency check on open)."""
        if not condition:
            raise IndexFormatError(f"corrupted index {self.path}: {what}; {rebuild_hint()}")


class StoredModel:
    """A model stored in an index: JSON parameters and metadata, arrays by name."""

    def __init__(self, stored, name, kind, params, meta, directory, array_names):
        self.stored, self.name, self.kind = stored, name, kind
        self.params, self.meta = params, meta
        self._dir, self.array_names = directory, array_names

    def array(self, key) -> np.ndarray:
        if key not in self.array_names:
            raise IndexFormatError(f"corrupted index {self.stored.path}: model {self.name!r} "
                                   f"has no array {key!r}; "
                                   f"{damage_advice(self.stored.path, self._dir + '/')}")
        return self.stored.array(f"{self._dir}/{key}.npy")

    def arrays(self) -> dict:
        return {key: self.array(key) for key in self.array_names}


def open_index(path, *, mmap=True, verify=False) -> StoredIndex:
    """Open the live generation of an index after checking its format version and files.

    Parameters
    ----------
    path : path
    mmap : bool, default True
        Memory-map the arrays instead of reading them.
    verify : bool, default False
        Also compare every file's SHA-256 with the manifest (reads every byte). Without
        it, presence and sizes are checked, and the loaders check shapes and statistics.

    Raises
    ------
    IndexFormatError
        Missing or foreign directory, other format version, missing, truncated or (with
        ``verify``) altered file.
    """
    return read_consistent(path, lambda stored: stored, mmap=mmap, verify=verify)


def _open_generation(path, generation, mmap, verify, unchecked=None) -> StoredIndex:
    manifest = _read_manifest(path, generation)
    root = os.path.join(path, generation)
    inside = {}
    for relpath, info in manifest["files"].items():
        if unchecked is not None and relpath.startswith(unchecked):
            continue
        full = os.path.join(root, relpath)
        try:  # a regular file inside the index (the arrays are memory-mapped by name)
            fd = _regular(full, path, f"{generation}/{relpath}", inside)
        except (FileNotFoundError, NotADirectoryError):
            if not os.path.isdir(root):
                raise FileNotFoundError(errno.ENOENT, "generation removed", root) from None
            raise IndexFormatError(f"corrupted index {path}: {relpath} is missing; "
                                   f"{damage_advice(path, relpath)}") from None
        except OSError as exc:
            raise IndexFormatError(f"cannot read the index {path}: {relpath}: "
                                   f"{exc.strerror}") from None
        try:
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size != info["bytes"]:
            raise IndexFormatError(f"corrupted index {path}: {relpath} has {size} bytes, "
                                   f"expected {info['bytes']}; {damage_advice(path, relpath)}")
        if verify and _sha256(full) != info["sha256"]:
            raise IndexFormatError(f"corrupted index {path}: {relpath} does not match its "
                                   f"checksum; {damage_advice(path, relpath)}")
    return StoredIndex(path, generation, manifest, mmap, verify)


def read_consistent(path, load, *, mmap=True, verify=False):
    """``load(stored)`` on the live generation, retried if a writer removed it meanwhile.

    A reader that chose a generation just before two writers switched past it finds its
    files gone; it then starts again from the new ``CURRENT``. Errors that are not caused
    by such a race (the generation is still live) are raised as they are.
    """
    path = os.fspath(path)
    for attempt in range(_OPEN_ATTEMPTS):
        directory, generation = _locate(path)
        try:
            return load(_open_generation(directory, generation, mmap, verify))
        except (FileNotFoundError, IndexFormatError):
            if attempt + 1 < _OPEN_ATTEMPTS and current_generation(directory) != generation:
                continue
            if not os.path.isdir(os.path.join(directory, generation)):
                raise IndexFormatError(f"corrupted index {path}: its live generation "
                                       f"{generation} is missing; {rebuild_hint()}") from None
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def verify_index(path) -> StoredIndex:
    """Open with full checksum verification (see :func:`open_index`)."""
    return open_index(path, mmap=True, verify=True)


# ---------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------
class _HashingFile:
    """A binary file that computes its SHA-256 as it is written."""

    def __init__(self, f, digests, relpath):
        self._f, self._digests, self._relpath = f, digests, relpath
        self._hash = hashlib.sha256()

    def write(self, data):
        self._hash.update(data)
        return self._f.write(data)

    def close(self):
        self._f.close()
        self._digests[self._relpath] = self._hash.hexdigest()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _lock(path) -> int:
    """Take the writers' lock of an index directory; returns the descriptor that holds it
    (closing it releases the lock)."""
    import fcntl

    fd = os.open(os.path.join(path, _LOCK), os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


@contextlib.contextmanager
def _locked(path, held=False):
    """The writers' lock of an index directory (held while switching generations);
    nothing to do when the caller holds it already."""
    fd = None if held else _lock(path)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


def _owner_alive(tmp) -> bool:
    """True while the writer that owns the temporary directory ``tmp`` runs."""
    import fcntl

    try:
        fd = os.open(os.path.join(tmp, _OWNER), os.O_RDWR)
    except FileNotFoundError:
        try:
            return time.time() - os.path.getmtime(tmp) < _ORPHAN_SECONDS
        except OSError:
            return False
    except OSError:
        return True  # cannot tell: leave it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _link(source, target) -> None:
    """``source`` hard-linked at ``target`` (copied where the file system has no hard
    links): a file a new generation keeps."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _generation_number(name) -> int:
    return int(_GENERATION.match(name).group(1))


def _remove_leftovers(path, keep) -> None:
    """Delete generations not in ``keep``, dead writers' temporary directories, and the
    files of the version-2 layout an index was upgraded from."""
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if _GENERATION.match(name) and name not in keep:
            shutil.rmtree(full, ignore_errors=True)
        elif name.startswith(_TMP_PREFIX) and os.path.isdir(full) and not _owner_alive(full):
            shutil.rmtree(full, ignore_errors=True)
        elif name.startswith(CURRENT + ".tmp"):
            with contextlib.suppress(OSError):
                os.unlink(full)


class IndexWriter:
    """Writes the next generation of an index directory.

    Files go into a temporary directory inside the index directory; :meth:`commit`
    writes the manifest (with sizes and SHA-256 of every file) last and makes the
    generation live in one atomic step. Without a commit (an exception, a crash) the
    temporary directory is removed, or, after a crash, by the next writer.

    Parameters
    ----------
    path : path
        The index directory. If it exists it must be a cqa_search index (of any format
        version), the leftovers of an interrupted first build, or empty: a directory
        with other content is never touched.
    unchecked : str, optional
        Files of the live generation under this prefix are not checked when it is read as
        the base of the change (a damaged model that the change removes).
    nested : bool, default False
        The index is written inside a generation that another writer is making (a shard
        of a sharded index, in that writer's temporary directory, which no other writer
        reaches; see :meth:`nested`): it takes no writers' lock, and keeps no generation
        but the one it commits (no reader opens a generation being made).
    """

    _created = False
    _held = None
    #: The generation committed (None until then).
    committed = None

    def __init__(self, path, *, unchecked=None, nested=False):
        self.path = os.path.abspath(os.fspath(path))
        self.unchecked = unchecked
        self.is_nested = nested
        self._legacy = []
        if os.path.lexists(self.path):
            if not os.path.isdir(self.path):
                raise IndexFormatError(f"{path} exists and is not a directory")
            entries = os.listdir(self.path)
            if os.path.isfile(os.path.join(self.path, MANIFEST)) and CURRENT not in entries:
                self._legacy = self._legacy_entries(entries)
            elif not all(_is_ours(e) for e in entries):
                raise IndexFormatError(
                    f"{path} exists and is not a cqa_search index; refusing to replace it "
                    "(choose another output directory or empty it)")
        else:
            os.makedirs(self.path, exist_ok=True)  # mode 0o777 & ~umask, like any directory
            self._created = True
        self.tmp = self._make_tmp()
        self._files = []
        self._digests = {}

    def _legacy_entries(self, entries):
        """The entries of a version 1-2 index (manifest.json at the top), to be removed
        once the new generation is live."""
        try:
            with open(os.path.join(self.path, MANIFEST), encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = None
        if not isinstance(old, dict) or old.get("format") != _FORMAT_NAME:
            raise IndexFormatError(f"{self.path} exists and is not a cqa_search index; "
                                   "refusing to replace it (choose another output directory "
                                   "or empty it)")
        listed = {rel.split("/", 1)[0] for rel in old.get("files", {})} | {MANIFEST, "models"}
        return [e for e in entries if e in listed or e.startswith("." + MANIFEST)]

    def _make_tmp(self) -> str:
        import fcntl

        tmp = os.path.join(self.path, f"{_TMP_PREFIX}{secrets.token_hex(6)}")
        os.mkdir(tmp)  # not mkdtemp: its 0o700 would ignore the user's umask
        # The owner file is locked before it gets its name: another writer that finds the
        # name unlocked may remove the directory (its writer died).
        unnamed = os.path.join(tmp, _OWNER + ".new")
        self._owner = os.open(unnamed, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(self._owner, fcntl.LOCK_EX)
        os.rename(unnamed, os.path.join(tmp, _OWNER))
        return tmp

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.abort()
        return False

    def begin(self):
        """Take the writers' lock until the commit (or the abort) and return the live
        generation (a :class:`StoredIndex`, None when there is none): for a change that
        must build on the index as it is, with no other writer in between (adding or
        deleting questions)."""
        if self._held is None and not self.is_nested:
            self._held = _lock(self.path)
        return self._base()

    def _release(self):
        if self._held is not None:
            os.close(self._held)
            self._held = None

    def abort(self) -> None:
        """Remove the temporary directory (nothing was committed, or all was)."""
        self._release()
        if self._owner is not None:
            os.close(self._owner)
            self._owner = None
        if os.path.isdir(self.tmp):
            shutil.rmtree(self.tmp, ignore_errors=True)
        if self._created:  # a first build that failed: leave no empty index behind
            with contextlib.suppress(OSError):
                if set(os.listdir(self.path)) <= {_LOCK}:
                    shutil.rmtree(self.path)
            self._created = False

    def _full(self, relpath) -> str:
        if relpath.startswith("/") or ".." in relpath.split("/") or relpath in (MANIFEST, _OWNER):
            raise ValueError(f"not a relative index path: {relpath!r}")
        full = os.path.join(self.tmp, relpath)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if relpath not in self._files:
            self._files.append(relpath)
        return full

    def open(self, relpath, mode="w"):
        """Open a file of the index for writing (text files are UTF-8).

        A binary file (``"wb"``) is hashed while it is written, so that :meth:`commit`
        does not read it again.
        """
        full = self._full(relpath)
        if "b" in mode:
            return _HashingFile(open(full, mode), self._digests, relpath)
        return open(full, mode, encoding="utf-8")

    def array(self, relpath, arr) -> None:
        arr = np.asarray(arr)
        if arr.dtype.hasobject:
            raise ValueError(f"{relpath}: an index never stores Python objects")
        # The bytes of np.save (format 1.0: numbers only), written by Python's file in one
        # call and hashed on the way: numpy's own write says "N requested and M written",
        # without the system's reason, when the disk is full.
        arr = np.ascontiguousarray(arr)
        with self.open(relpath, "wb") as f:
            np.lib.format.write_array_header_1_0(f, np.lib.format.header_data_from_array_1_0(arr))
            f.write(arr.data)

    def json(self, relpath, obj) -> None:
        if (isinstance(obj, list) and set(map(type, obj)) <= {str}) or (
                isinstance(obj, dict) and set(map(type, obj.values())) <= {int}):
            with self.open(relpath, "wb") as f:
                f.write(orjson.dumps(obj))
            return
        with self.open(relpath) as f:  # floats as Python writes them (NaN included)
            json.dump(obj, f, ensure_ascii=False)

    def link(self, relpath, source, sha256=None) -> None:
        """Make the file ``source`` (of another generation, or written by another writer)
        part of this generation at ``relpath``, hard-linked (copied where the file system
        has no hard links), with its SHA-256 when known."""
        _link(source, self._full(relpath))
        if sha256 is not None:
            self._digests[relpath] = sha256

    def digest(self, relpath) -> str:
        """SHA-256 of a file written into this generation."""
        found = self._digests.get(relpath)
        return found if found is not None else _sha256(self._full(relpath))

    def add_file(self, relpath, sha256=None) -> None:
        """Make part of this generation a file written into :attr:`tmp` by another
        process (e.g. a shard index built by a Ray task); its SHA-256 is computed at
        :meth:`commit` unless given."""
        full = self._full(relpath)
        if not os.path.isfile(full):
            raise FileNotFoundError(errno.ENOENT, "no such file in the new generation", full)
        if sha256 is not None:
            self._digests[relpath] = sha256

    def commit(self, manifest, *, keep=()) -> str:
        """Write the manifest last and make this generation the live one.

        Parameters
        ----------
        manifest : dict or callable
            The manifest, or ``manifest(base) -> dict`` computed under the writers' lock
            from the live generation ``base`` (a :class:`StoredIndex`, None when there is
            none): an update of the index as it is at that moment. Its entries made here
            (format, versions, ``created``, ``files``) are replaced, so that an update
            may start from ``base.manifest``.
        keep : iterable of str or callable
            Files of the live generation to carry over (hard-linked) into this one, or
            ``keep(base) -> iterable`` likewise. A file written here wins.

        Returns
        -------
        str
            The new generation's name.
        """
        self._sync_written()
        with _locked(self.path, held=self._held is not None or self.is_nested):
            base = self._base()
            if callable(manifest):
                manifest = manifest(base)
            kept = keep(base) if callable(keep) else keep
            files = {}
            for relpath in kept:
                if relpath in self._files:
                    continue
                _link(base.file(relpath), os.path.join(self.tmp, relpath))
                files[relpath] = base.manifest["files"][relpath]
            for relpath in self._files:
                full = os.path.join(self.tmp, relpath)
                files[relpath] = {"bytes": os.path.getsize(full),
                                  "sha256": self._digests.get(relpath) or _sha256(full)}
            made_here = {"format": _FORMAT_NAME, "format_version": FORMAT_VERSION,
                         "package_version": __version__, "created": _now()}
            manifest = {**made_here, **{k: v for k, v in manifest.items()
                                        if k not in made_here and k != "files"},
                        "files": dict(sorted(files.items()))}
            with open(os.path.join(self.tmp, MANIFEST), "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=1, ensure_ascii=False)
                f.flush()
                os.fsync(f.fileno())
            os.unlink(os.path.join(self.tmp, _OWNER))
            numbers = [_generation_number(n) for n in os.listdir(self.path)
                       if _GENERATION.match(n)]
            generation = f"gen-{max(numbers, default=0) + 1:06d}"
            _fsync_dir(self.tmp)
            os.rename(self.tmp, os.path.join(self.path, generation))
            pointer = os.path.join(self.path, f"{CURRENT}.tmp-{secrets.token_hex(4)}")
            with open(pointer, "w", encoding="ascii") as f:
                f.write(generation + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(pointer, os.path.join(self.path, CURRENT))  # the switch
            _fsync_dir(self.path)
            os.close(self._owner)
            self._owner = None
            self._created = False
            for name in self._legacy:
                full = os.path.join(self.path, name)
                if os.path.isdir(full) and not os.path.islink(full):
                    shutil.rmtree(full, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(full)
            _remove_leftovers(self.path, {generation} if self.is_nested or base is None
                              else {generation, base.generation})
        self._release()
        self.committed = generation
        return generation

    @contextlib.contextmanager
    def nested(self, directory, *, base=None):
        """The writer of an index inside this generation, at ``directory`` (a shard of a
        sharded index): a nested :class:`IndexWriter`, which must commit within the
        block; that index is then part of this generation (:meth:`add_index`).

        Parameters
        ----------
        directory : str
            Relative to this generation.
        base : StoredIndex, optional
            That index as the generation this one replaces holds it: its live generation
            is linked in first, so that the nested writer changes it (its :meth:`begin`
            returns it, its files are there to keep).
        """
        target = os.path.join(self.tmp, directory)
        if base is not None:
            link_generation(base, target)
        with IndexWriter(target, nested=True) as writer:
            yield writer
            if writer.committed is None:
                raise RuntimeError(f"the index at {directory} was not committed")
        self.add_index(directory)

    def add_index(self, directory) -> None:
        """Make the index committed at ``directory`` inside this generation (by a nested
        writer, maybe in another process) part of it: its ``CURRENT``, manifest and
        files, with the checksums its manifest lists."""
        stored = open_index(os.path.join(self.tmp, directory))
        self.add_file(f"{directory}/{CURRENT}")
        self.add_file(f"{directory}/{stored.generation}/{MANIFEST}")
        for rel, info in stored.manifest["files"].items():
            self.add_file(f"{directory}/{stored.generation}/{rel}", info["sha256"])

    def _base(self):
        generation = current_generation(self.path)
        if generation is None:
            return None
        try:
            return _open_generation(self.path, generation, True, False, self.unchecked)
        except IndexFormatError:
            return None  # the live generation is unusable: a full rebuild replaces it

    def _sync_written(self) -> None:
        """fsync the written files: the manifest must never name data still in flight."""
        for relpath in self._files:
            fd = os.open(os.path.join(self.tmp, relpath), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def link_generation(base, target) -> None:
    """Hard-link the generation ``base`` (its ``CURRENT``, manifest and files) into the
    directory ``target``: the index a nested writer at ``target`` changes (its
    :meth:`IndexWriter.begin` returns it; another process may be that writer, e.g. a Ray
    task compacting a shard)."""
    for rel in (CURRENT, f"{base.generation}/{MANIFEST}",
                *(f"{base.generation}/{r}" for r in base.manifest["files"])):
        _link(os.path.join(base.path, rel), os.path.join(target, rel))


def rollback(path) -> tuple:
    """Make the generation before the live one live again, as the next generation (its
    files hard-linked, checked against their checksums first): the way back from a change
    that damaged the index or that was a mistake, while that generation is kept (each
    writer keeps the one before its own).

    Returns
    -------
    (str, str, str)
        The generation that was live, the one restored, and the new live one.

    Raises
    ------
    IndexFormatError
        No index at ``path``, or no sound earlier generation is left.
    """
    directory, _ = _locate(path)
    with IndexWriter(directory) as writer:
        writer.begin()  # no other writer from here to the switch
        live = current_generation(directory)
        older = sorted((name for name in os.listdir(directory) if _GENERATION.match(name)
                        and _generation_number(name) < _generation_number(live)),
                       key=_generation_number, reverse=True)
        for name in older:
            try:
                previous = _open_generation(directory, name, True, True)
                break
            except (IndexFormatError, OSError) as exc:
                logger.warning("generation %s of %s cannot be restored: %s", name, path, exc)
        else:
            raise IndexFormatError(f"{path} keeps no sound generation before {live} to roll "
                                   "back to (a change keeps only the generation before it)")
        for relpath, info in previous.manifest["files"].items():
            _link(previous.file(relpath), os.path.join(writer.tmp, relpath))
            writer.add_file(relpath, sha256=info["sha256"])
        manifest = {k: v for k, v in previous.manifest.items()
                    if k not in ("format", "format_version", "package_version", "created",
                                 "files")}
        manifest["rolled_back"] = {"from": live, "to": previous.generation}
        generation = writer.commit(manifest)
    return live, previous.generation, generation
