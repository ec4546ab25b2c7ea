"""Small files under `lake.root`: the schema history, the stream job's table list and start
offset, the jobs' leases, pending resets, and Spark's own checkpoint logs that binlake reads.

`lake.root` is a local path, a `/Volumes/...` path or a URI (`file://`, `s3://`, `abfss://`,
`gs://`, `dbfs:/`), so nothing here uses `pathlib`: paths are strings joined with `/` (`join`),
and every file operation goes through one interface, `LakeFiles`, with two implementations:

- `HadoopFiles`, on the driver: Hadoop's `FileSystem` through the session's JVM, the file systems
  and credentials Spark itself writes the lake and its checkpoints with (on Databricks, the
  cluster's and Unity Catalog's).
- `ArrowFiles`, where no JVM is reachable: the stream source plans each micro-batch
  (`stream_source.StreamSpec.plan`) in a Python process Spark starts, without py4j, and reads the
  schema history and the job's table list there. A Spark Connect client (serverless, standard
  access mode) has no JVM either, so its driver uses them too (`driver_files`). `pyarrow.fs`
  reads local paths, `/Volumes` and `dbfs:/` (through the `/dbfs` mount of Databricks nodes) and
  object stores with the credentials of the process's environment.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from py4j.protocol import Py4JJavaError
from pyarrow import fs as pafs

from binlake.config.settings import LakeConfig
from binlake.errors import LakeError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def join(base: str, *parts: str) -> str:
    """`base/part/...` for a local path and a URI alike (`pathlib` would fold `s3://` to `s3:/`)."""
    return "/".join([base.rstrip("/"), *parts])


def local_path(path: str) -> str | None:
    """The local file system's path for a local path or a `file:` URI (`file:/x`, `file:///x`);
    None for any other URI."""
    if path.startswith("file:"):
        local = path.removeprefix("file:")
        if local.startswith("//"):  # file://[host]/path: the host is this one
            local = "/" + local[2:].partition("/")[2]
        return local
    return None if LakeConfig.is_uri(path) else path


def _temporary(path: str) -> str:
    """A hidden sibling of `path` no other writer uses (a stream and a snapshot `--reset` may
    replace the same file at once)."""
    folder, _, name = path.rpartition("/")
    return f"{folder}/.{name}.{uuid.uuid4().hex}.tmp"


class LakeFiles(ABC):
    """Reads and writes small files by their path or URI. A missing file is an answer (None,
    an empty listing), never an error."""

    @abstractmethod
    def read_text(self, path: str) -> str | None:
        """The file's text; None if there is no such file."""

    @abstractmethod
    def write_text(self, path: str, text: str) -> None:
        """Create or replace the file (and its folders). A reader sees the old text or the new,
        never a part, wherever the file system can rename over a file (local disks, `/Volumes`,
        `/dbfs`); object stores publish a file whole once written."""

    @abstractmethod
    def create_text(self, path: str, text: str) -> bool:
        """Create the file (and its folders) unless it exists: False then, the file untouched.
        Of writers racing for one path exactly one creates it, so a versioned file can take
        a change at a time (see `VersionedText`); a reader finds the whole file
        or none."""

    @abstractmethod
    def names(self, folder: str) -> list[str]:
        """The names of the entries in `folder`; none if it does not exist."""

    @abstractmethod
    def modified(self, path: str) -> float | None:
        """When the file was last written (seconds since the epoch); None if it does not exist."""

    @abstractmethod
    def delete(self, path: str) -> None:
        """Remove the file if it exists."""

    @abstractmethod
    def delete_tree(self, folder: str) -> None:
        """Remove the folder and everything under it, if it exists."""

    def exists(self, path: str) -> bool:
        return self.modified(path) is not None

    def surely_absent(self, folder: str) -> bool:
        """Whether `folder` is known not to exist; False where the answer would cost more than
        the caller's own attempt (see `HadoopFiles`)."""
        return False


def driver_files(spark: SparkSession) -> LakeFiles:
    """The driver's files: Hadoop's on a classic session, `ArrowFiles` on Spark Connect."""
    from binlake.runtime.spark import is_connect

    return ArrowFiles() if is_connect(spark) else HadoopFiles(spark)


class HadoopFiles(LakeFiles):
    """Hadoop's `FileSystem` of each path, through the session's JVM (driver only).

    Local paths use the raw local file system: Hadoop's default one writes a `.crc` sidecar per
    file and renames it after the file, so a reader in between could fail its checksum.

    A path that may well be missing (a table's first schema history, a reset that is not
    pending, a lease nobody holds) is asked `exists` first: a Java exception
    through py4j is costly, since PySpark classifies each one against its known error classes,
    a JVM round trip apiece, where `exists` is one round trip; a snapshot of many tables meets
    hundreds of missing files on its critical path (docs/performance.md#measured-constants). A
    file removed between the two still reads as missing.
    """

    def __init__(self, spark: SparkSession) -> None:
        self._jvm: Any = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()

    def _resolve(self, path: str) -> tuple[Any, Any]:
        """(file system, Hadoop path) of `path`."""
        hadoop = self._jvm.org.apache.hadoop.fs
        where = hadoop.Path(path)
        system = where.getFileSystem(self._conf)
        if system.getUri().getScheme() == "file":
            system = hadoop.FileSystem.getLocal(self._conf).getRaw()
        return system, where

    def _raised(self, error: Py4JJavaError, java_class: str) -> bool:
        """Whether the JVM's exception is a `java_class` (or a subclass: each file system
        raises its own)."""
        kind = self._jvm.java.lang.Class.forName(java_class)
        return bool(kind.isInstance(error.java_exception))

    def _missing(self, error: Py4JJavaError) -> bool:
        return self._raised(error, "java.io.FileNotFoundException")

    def read_text(self, path: str) -> str | None:
        system, where = self._resolve(path)
        if not system.exists(where):  # an exception costs more (see the class)
            return None
        try:
            stream = system.open(where)
        except Py4JJavaError as error:
            if self._missing(error):
                return None
            raise
        try:
            return bytes(stream.readAllBytes()).decode()
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        """Written beside the file, then renamed over it. Where the file system refuses to rename
        over a file (HDFS, S3A, ABFS), the file is overwritten in place instead: on an object
        store the new object replaces the old whole; elsewhere a reader may meet a partial file
        and fail, but never finds the file missing (which would read as "no tables")."""
        system, where = self._resolve(path)
        temporary = self._jvm.org.apache.hadoop.fs.Path(_temporary(path))
        data = bytearray(text.encode())
        self._write(system, temporary, data)
        if not self._renamed(system, temporary, where):
            self._write(system, where, data)
            system.delete(temporary, False)

    @staticmethod
    def _write(system: Any, where: Any, data: bytearray) -> None:
        stream = system.create(where, True)
        try:
            stream.write(data)
        finally:
            stream.close()

    def create_text(self, path: str, text: str) -> bool:
        """On a local disk, `_create_local`: Hadoop's raw local file system checks for the file,
        then opens it for writing, so two writers could both create it. Elsewhere Hadoop's
        `create` without overwrite, one atomic request on HDFS, ABFS and GCS; on S3A it is a
        check then a write unless the connector makes it a conditional write."""
        system, where = self._resolve(path)
        if system.getUri().getScheme() == "file":
            return _create_local(str(system.pathToFile(where).getPath()), text)
        try:
            stream = system.create(where, False)
            try:
                stream.write(bytearray(text.encode()))
            finally:
                stream.close()
        except Py4JJavaError as error:
            if any(self._raised(error, kind) for kind in _EXISTS):
                return False
            raise
        return True

    def _renamed(self, system: Any, source: Any, target: Any) -> bool:
        """Whether `source` replaced `target` (file systems refuse with False or by raising)."""
        try:
            return bool(system.rename(source, target))
        except Py4JJavaError as error:
            if self._raised(error, "org.apache.hadoop.fs.FileAlreadyExistsException"):
                return False
            raise

    def names(self, folder: str) -> list[str]:
        system, where = self._resolve(folder)
        if not system.exists(where):  # an exception costs more (see the class)
            return []
        try:
            return [status.getPath().getName() for status in system.listStatus(where)]
        except Py4JJavaError as error:
            if self._missing(error):
                return []
            raise

    def surely_absent(self, folder: str) -> bool:
        """Hadoop knows a folder of an object store too; a Spark Connect client (`ArrowFiles`)
        gets Spark's errors as a gRPC status, without py4j's cost, and pyarrow sees an object
        store's folder as no file, so it never answers here."""
        system, where = self._resolve(folder)
        return not system.exists(where)

    def modified(self, path: str) -> float | None:
        system, where = self._resolve(path)
        if not system.exists(where):  # an exception costs more (see the class)
            return None
        try:
            return float(system.getFileStatus(where).getModificationTime()) / 1000
        except Py4JJavaError as error:
            if self._missing(error):
                return None
            raise

    def delete(self, path: str) -> None:
        system, where = self._resolve(path)
        system.delete(where, False)

    def delete_tree(self, folder: str) -> None:
        system, where = self._resolve(folder)
        system.delete(where, True)


class ArrowFiles(LakeFiles):
    """`pyarrow.fs` (no JVM): for the Python processes Spark starts."""

    def read_text(self, path: str) -> str | None:
        system, where = _arrow(path)
        try:
            with system.open_input_stream(where) as stream:
                return bytes(stream.read()).decode()
        except FileNotFoundError:
            return None

    def write_text(self, path: str, text: str) -> None:
        system, where = _arrow(path)
        temporary = _temporary(where)
        system.create_dir(where.rpartition("/")[0], recursive=True)
        with system.open_output_stream(temporary) as stream:
            stream.write(text.encode())
        system.move(temporary, where)

    def create_text(self, path: str, text: str) -> bool:
        """On a local disk, `/Volumes` or `/dbfs` only: `pyarrow.fs` has no create-if-absent on
        an object store, which the versioned files need (the planning process only reads)."""
        system, where = _arrow(path)
        if not isinstance(system, pafs.LocalFileSystem):
            raise LakeError(
                f"cannot create {path} without overwriting it from a process without a JVM: on "
                "Spark Connect (serverless, standard access mode) put lake.root on a Unity "
                "Catalog volume (/Volumes/<catalog>/<schema>/<volume>/...) or a local path"
            )
        return _create_local(where, text)

    def names(self, folder: str) -> list[str]:
        """A missing folder lists empty. A local folder is read with `os.listdir` (readdir
        alone), so a listing holds every entry that outlives it: pyarrow stats each entry, and
        an entry another process deletes meanwhile makes it return part of the folder without
        an error, so that a `VersionedText` writer could take a stale version for the newest
        and lose a change (`test_stream_tables`'s many-processes test holds it to that)."""
        system, where = _arrow(folder)
        if isinstance(system, pafs.LocalFileSystem):
            try:
                return os.listdir(where)
            except (FileNotFoundError, NotADirectoryError):  # a path under a file holds none
                return []
        listing = system.get_file_info(pafs.FileSelector(where, allow_not_found=True))
        return [info.base_name for info in listing]

    def modified(self, path: str) -> float | None:
        system, where = _arrow(path)
        info = system.get_file_info(where)
        if info.type == pafs.FileType.NotFound or info.mtime is None:
            return None
        return info.mtime.timestamp()

    def delete(self, path: str) -> None:
        system, where = _arrow(path)
        try:
            system.delete_file(where)
        except FileNotFoundError:
            return

    def delete_tree(self, folder: str) -> None:
        system, where = _arrow(folder)
        try:
            system.delete_dir(where)
        except FileNotFoundError:
            return


#: The exceptions a file system's `create` without overwrite raises for a file that exists:
#: Hadoop's, or java.nio's (the GCS connector's).
_EXISTS = (
    "org.apache.hadoop.fs.FileAlreadyExistsException",
    "java.nio.file.FileAlreadyExistsException",
)


def _create_local(path: str, text: str) -> bool:
    """Create a local file unless it exists: written beside it, then hard-linked to its name.
    `link` fails if the name exists, in one step, so of writers racing one wins, and the file
    is whole from its first moment (a file opened with `O_EXCL` would be empty at first)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = _temporary(path)
    with open(temporary, "x", encoding="utf-8") as stream:
        stream.write(text)
    try:
        os.link(temporary, path)
    except FileExistsError:
        return False
    finally:
        os.remove(temporary)
    return True


def _arrow(path: str) -> tuple[pafs.FileSystem, str]:
    """The `pyarrow` file system of `path` and the path within it.

    Only the URI's scheme and authority go through `FileSystem.from_uri`; the rest is used as
    it is, since table and database names may hold `%`, `#` or `?`, which a URI parser would
    decode or cut off. `dbfs:/x` is `/dbfs/x`, the mount every Databricks node has.
    """
    if path.startswith("dbfs:"):
        return pafs.LocalFileSystem(), "/dbfs/" + path.removeprefix("dbfs:").lstrip("/")
    local = local_path(path)
    if local is not None:
        return pafs.LocalFileSystem(), local
    scheme, _, rest = path.partition("://")
    authority, _, inner = rest.partition("/")
    system, base = _arrow_root(f"{scheme}://{authority}/")
    return system, join(base, inner)


@functools.lru_cache(maxsize=16)
def _arrow_root(uri: str) -> tuple[pafs.FileSystem, str]:
    """One file system per bucket or container and process: `from_uri` may ask the store where
    the bucket lives."""
    return pafs.FileSystem.from_uri(uri)


def batch_ids(files: LakeFiles, log: str) -> list[int]:
    """The micro-batch ids a streaming checkpoint's `offsets` or `commits` log holds (its files
    are named by id; Spark's temporary and checksum files are not)."""
    return [int(name) for name in files.names(log) if name.isdigit()]


#: Versions a `VersionedText` keeps: an older one goes when a change creates one this much newer.
KEPT_VERSIONS = 10
_VERSION = re.compile(r"(\d+)\.json")
#: One lock per `VersionedText` folder in this process (see `VersionedText.update`).
_LOCKS: dict[str, threading.Lock] = {}


class VersionedText:
    """A small document in the lake that several writers change at once: threads of one process
    and other processes (two stream jobs on one lake, a stream and a snapshot).

    A read, then a write of one file would let one writer's change overwrite another's. So each
    change is a new version file, `<folder>/<n + 1>.json`, created only if absent
    (`LakeFiles.create_text`): of two writers that read version n, one creates n + 1, and the
    other reads again and applies its change to that. A reader takes the newest version; a
    writer that crashes leaves the versions as they were, or with its change whole. Lakes from
    before versions hold one file, `<folder>.json`: it is read as version 0."""

    def __init__(self, folder: str, files: LakeFiles) -> None:
        self.folder = folder
        self.files = files

    def read(self) -> str | None:
        return self._latest()[1]

    def update(self, change: Callable[[str | None], str | None]) -> None:
        """Apply `change` (the newest text -> the new text, or None for no change) as one
        step, against every other writer. On a conflict `change` runs again on the newer text,
        which may hold its own result already: it must only compute, and applied twice change
        nothing more."""
        with _LOCKS.setdefault(self.folder, threading.Lock()):  # threads here queue, not retry
            while True:
                version, text = self._latest()
                after = change(text)
                if after is None or after == text or self._created(version + 1, after):
                    return
                log.info("%s changed meanwhile: the change goes to its new version", self.folder)

    def _created(self, version: int, text: str) -> bool:
        """Whether this writer created `version` and it counts (False: another writer was
        first). Creating a version removes the one `KEPT_VERSIONS` older, so the folder stays
        small; a writer that read before that removal and stalled can create the removed one
        again, which readers never see (newer ones exist): it is taken back and the change
        applied to the newest."""
        if not self.files.create_text(self._version(version), text):
            return False
        if max(self._versions()) >= version + KEPT_VERSIONS:
            self.files.delete(self._version(version))
            return False
        if version > KEPT_VERSIONS:
            self.files.delete(self._version(version - KEPT_VERSIONS))
        return True

    def _latest(self) -> tuple[int, str | None]:
        """(version, text) of the newest version; (0, the file from before versions, or None)
        if there is none. A version removed between the listing and the read (`KEPT_VERSIONS`
        newer ones came meanwhile) is listed again."""
        while True:
            versions = self._versions()
            if not versions:
                return 0, self.files.read_text(f"{self.folder}.json")
            text = self.files.read_text(self._version(max(versions)))
            if text is not None:
                return max(versions), text

    def _versions(self) -> list[int]:
        return [int(m[1]) for n in self.files.names(self.folder) if (m := _VERSION.fullmatch(n))]

    def _version(self, version: int) -> str:
        return join(self.folder, f"{version:020d}.json")
