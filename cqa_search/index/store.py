"""The index directory: versioned manifest, checksummed ``.npy``/JSON files, atomic writes.

Layout (paths relative to the index directory)::

    manifest.json            format_version, package version, analyzer, stats, files + sha256
    vocab.json  doc_ids.json  categories.json  surface.json
    archive.jsonl  archive_offsets.npy  doc_category.npy  doc_id_rank.npy
    fields/<field>/{indptr,indices,counts,doc_len,sequence}.npy  fields/<field>/<model>.npy
    models/<name>.<id>/      a trained model (model.json + arrays), added by save_model

Only ``.npy`` (loaded with ``allow_pickle=False``) and UTF-8 JSON/JSONL are used, so
opening an index never runs code. A build writes into a temporary sibling directory,
writes the manifest last and then renames: a crash leaves no half index behind. A model
added later goes into a new directory first; the manifest, replaced atomically, then
points at it, so a crash leaves either the old model or the new one in use.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import tempfile

import numpy as np

from .._version import __version__
from ..exceptions import IndexFormatError

__all__ = ["FORMAT_VERSION", "MANIFEST", "IndexWriter", "StoredIndex", "StoredModel",
           "open_index", "is_compatible", "verify_index", "save_model", "remove_model"]

#: Version of the on-disk layout; bumped whenever an older reader would misread it.
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
_FORMAT_NAME = "cqa_search-index"
_REBUILD = "rebuild it with `cqa-search build-index`"


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read_manifest(path) -> dict:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise IndexFormatError(f"no index at {path} (build one with `cqa-search build-index`)")
    if not os.path.isdir(path):
        raise IndexFormatError(f"{path} is a file, not an index directory")
    mpath = os.path.join(path, MANIFEST)
    if not os.path.exists(mpath):
        raise IndexFormatError(f"{path} is not a cqa_search index (it has no {MANIFEST})")
    try:
        with open(mpath, encoding="utf-8") as f:
            manifest = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexFormatError(f"corrupted index {path}: unreadable {MANIFEST} ({exc}); "
                               f"{_REBUILD}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT_NAME:
        raise IndexFormatError(f"{path} is not a cqa_search index ({MANIFEST} is foreign)")
    return manifest


def is_compatible(path) -> bool:
    """Cheap probe: True when ``path`` holds an index this version can open."""
    try:
        return _read_manifest(path).get("format_version") == FORMAT_VERSION
    except IndexFormatError:
        return False


class StoredIndex:
    """An opened index directory: its manifest and typed access to its files.

    Use :func:`open_index` to create one.
    """

    def __init__(self, path, manifest, mmap):
        self.path = os.fspath(path)
        self.manifest = manifest
        self.mmap = mmap

    def file(self, relpath) -> str:
        """Absolute path of a file listed in the manifest."""
        if relpath not in self.manifest["files"]:
            raise IndexFormatError(f"corrupted index {self.path}: {relpath} is not in its "
                                   f"manifest; {_REBUILD}")
        return os.path.join(self.path, relpath)

    def has(self, relpath) -> bool:
        return relpath in self.manifest["files"]

    def array(self, relpath) -> np.ndarray:
        """A stored array (memory-mapped read-only when the index was opened with mmap)."""
        try:
            return np.load(self.file(relpath), mmap_mode="r" if self.mmap else None,
                           allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise IndexFormatError(f"corrupted index {self.path}: cannot read {relpath} "
                                   f"({exc}); {_REBUILD}") from None

    def json(self, relpath):
        """A stored JSON document."""
        try:
            with open(self.file(relpath), encoding="utf-8") as f:
                return json.load(f)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise IndexFormatError(f"corrupted index {self.path}: cannot read {relpath} "
                                   f"({exc}); {_REBUILD}") from None

    @property
    def models(self) -> dict:
        """Model name -> its manifest entry (``kind``, ``dir``, ``created``)."""
        return self.manifest.get("models", {})

    def model(self, name) -> "StoredModel":
        """A stored model's kind, parameters, learned metadata and (lazy) arrays."""
        entry = self.models.get(name)
        if entry is None:
            raise IndexFormatError(f"{self.path} has no model {name!r} (models: "
                                   f"{', '.join(self.models) or 'none'})")
        doc = self.json(f"{entry['dir']}/model.json")
        return StoredModel(self, name, entry["kind"], doc.get("params", {}), doc.get("meta", {}),
                           entry["dir"], tuple(doc.get("arrays", ())))

    def check(self, condition, what) -> None:
        """Raise IndexFormatError unless ``condition`` (a consistency check on open)."""
        if not condition:
            raise IndexFormatError(f"corrupted index {self.path}: {what}; {_REBUILD}")


class StoredModel:
    """A model stored in an index: JSON parameters and metadata, arrays by name."""

    def __init__(self, stored, name, kind, params, meta, directory, array_names):
        self.stored, self.name, self.kind = stored, name, kind
        self.params, self.meta = params, meta
        self._dir, self.array_names = directory, array_names

    def array(self, key) -> np.ndarray:
        if key not in self.array_names:
            raise IndexFormatError(f"corrupted index {self.stored.path}: model {self.name!r} "
                                   f"has no array {key!r}; {_REBUILD}")
        return self.stored.array(f"{self._dir}/{key}.npy")

    def arrays(self) -> dict:
        return {key: self.array(key) for key in self.array_names}


def open_index(path, *, mmap=True, verify=False) -> StoredIndex:
    """Open an index directory after checking its format version and files.

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
    manifest = _read_manifest(path)
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise IndexFormatError(
            f"{os.fspath(path)} has index format version {version}, but this cqa_search "
            f"{__version__} reads version {FORMAT_VERSION}: {_REBUILD}")
    for relpath, info in manifest.get("files", {}).items():
        full = os.path.join(path, relpath)
        if not os.path.isfile(full):
            raise IndexFormatError(f"corrupted index {os.fspath(path)}: {relpath} is missing; "
                                   f"{_REBUILD}")
        size = os.path.getsize(full)
        if size != info["bytes"]:
            raise IndexFormatError(
                f"corrupted index {os.fspath(path)}: {relpath} has {size} bytes, expected "
                f"{info['bytes']}; {_REBUILD}")
        if verify and _sha256(full) != info["sha256"]:
            raise IndexFormatError(f"corrupted index {os.fspath(path)}: {relpath} does not "
                                   f"match its checksum; {_REBUILD}")
    return StoredIndex(path, manifest, mmap)


def verify_index(path) -> StoredIndex:
    """Open with full checksum verification (see :func:`open_index`)."""
    return open_index(path, mmap=True, verify=True)


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


class IndexWriter:
    """Writes an index directory atomically.

    Files go into a temporary sibling directory; :meth:`commit` writes the manifest (with
    sizes and SHA-256 of every file) last and renames the directory into place, replacing
    an existing index. Without a commit (an exception, a crash) the temporary directory
    is removed or, after a crash, left as ``.NAME.tmp-*`` and never taken for an index.

    Parameters
    ----------
    path : path
        Final index directory. If it exists it must be a cqa_search index (any version)
        or empty: a directory with other content is never replaced.
    """

    def __init__(self, path):
        self.path = os.path.abspath(os.fspath(path))
        if os.path.exists(self.path):
            if not os.path.isdir(self.path):
                raise IndexFormatError(f"{path} exists and is not a directory")
            if os.listdir(self.path) and not os.path.exists(os.path.join(self.path, MANIFEST)):
                raise IndexFormatError(
                    f"{path} exists and is not a cqa_search index; refusing to replace it "
                    "(choose another output directory or empty it)")
        parent = os.path.dirname(self.path)
        os.makedirs(parent, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(self.path)}.tmp-", dir=parent)
        self._files = []
        self._digests = {}

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if os.path.isdir(self.tmp):
            shutil.rmtree(self.tmp, ignore_errors=True)
        return False

    def _full(self, relpath) -> str:
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
        np.save(self._full(relpath), np.ascontiguousarray(arr), allow_pickle=False)

    def json(self, relpath, obj) -> None:
        with self.open(relpath) as f:
            json.dump(obj, f, ensure_ascii=False)

    def commit(self, manifest: dict) -> None:
        """Write the manifest last and move the index into place."""
        files = {}
        for relpath in self._files:
            full = os.path.join(self.tmp, relpath)
            digest = self._digests.get(relpath) or _sha256(full)
            files[relpath] = {"bytes": os.path.getsize(full), "sha256": digest}
        manifest = {"format": _FORMAT_NAME, "format_version": FORMAT_VERSION,
                    "package_version": __version__,
                    "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                    **manifest, "files": files}
        with open(os.path.join(self.tmp, MANIFEST), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1, ensure_ascii=False)
            f.flush()
            os.fsync(f.fileno())
        old = None
        if os.path.exists(self.path):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(self.path)}.old-",
                                   dir=os.path.dirname(self.path))
            os.rmdir(old)
            os.rename(self.path, old)
        os.rename(self.tmp, self.path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def _write_manifest(path, manifest) -> None:
    tmp = os.path.join(path, f".{MANIFEST}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(path, MANIFEST))


def save_model(path, name, *, kind, params, meta, arrays) -> None:
    """Add a trained model to an existing index (replacing a model of the same name).

    Parameters
    ----------
    path : path
        The index directory (must open without error).
    name : str
        Model name (letters, digits, ``-`` and ``_``), unique in the index.
    kind : str
        What reads it back (e.g. ``"ibm1"``, ``"topics"``, ``"ranker"``).
    params, meta : dict
        JSON-serialisable hyperparameters and learned scalars/lists.
    arrays : dict of str -> ndarray
        Learned arrays (numeric or fixed-width unicode; never objects).
    """
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"model name must use letters, digits, '-' and '_'; got {name!r}")
    stored = open_index(path)
    manifest = dict(stored.manifest)
    models_dir = os.path.join(stored.path, "models")
    os.makedirs(models_dir, exist_ok=True)
    full = tempfile.mkdtemp(prefix=f"{name}.", dir=models_dir)
    relative = f"models/{os.path.basename(full)}"
    try:
        for key, arr in arrays.items():
            arr = np.asarray(arr)
            if arr.dtype.hasobject:
                raise ValueError(f"array {key!r} of model {name!r} holds Python objects")
            np.save(os.path.join(full, f"{key}.npy"), np.ascontiguousarray(arr),
                    allow_pickle=False)
        with open(os.path.join(full, "model.json"), "w", encoding="utf-8") as f:
            json.dump({"kind": kind, "params": params, "meta": meta, "arrays": list(arrays)},
                      f, ensure_ascii=False)
        files = {rel: info for rel, info in manifest["files"].items()}
        old = manifest.get("models", {}).get(name)
        if old is not None:
            files = {rel: info for rel, info in files.items()
                     if not rel.startswith(old["dir"] + "/")}
        for entry in sorted(os.listdir(full)):
            rel = f"{relative}/{entry}"
            files[rel] = {"bytes": os.path.getsize(os.path.join(full, entry)),
                          "sha256": _sha256(os.path.join(full, entry))}
        models = dict(manifest.get("models", {}))
        models[name] = {"kind": kind, "dir": relative,
                        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        manifest.update(files=files, models=models)
        _write_manifest(stored.path, manifest)
    except BaseException:
        shutil.rmtree(full, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(os.path.join(stored.path, old["dir"]), ignore_errors=True)


def remove_model(path, name) -> None:
    """Remove a model from an index (the manifest first, then its files)."""
    stored = open_index(path)
    manifest = dict(stored.manifest)
    models = dict(manifest.get("models", {}))
    old = models.pop(name, None)
    if old is None:
        raise IndexFormatError(f"{stored.path} has no model {name!r}")
    manifest["files"] = {rel: info for rel, info in manifest["files"].items()
                         if not rel.startswith(old["dir"] + "/")}
    manifest["models"] = models
    _write_manifest(stored.path, manifest)
    shutil.rmtree(os.path.join(stored.path, old["dir"]), ignore_errors=True)
