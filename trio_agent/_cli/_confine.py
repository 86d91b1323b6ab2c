"""Opening files inside a root folder, and nothing outside it, symbolic links included.

The command line's file tools take their paths from a model, which may be wrong or
misled by what it reads: a path must never reach a file outside ``--root``, not by
``..``, not through a symbolic link, and not through a link swapped in while a tool
works. Only regular files are read, and nothing is ever written.

Why it is done this way: checking a path and then opening it leaves a gap in which a
folder on the way can be replaced by a link that leads out (time of check, time of
use). So a path is first resolved (links followed, as whoever made them meant) and
refused unless it stays inside the root; then it is opened one component at a time,
each relative to the folder opened before it (``dir_fd``) and with ``O_NOFOLLOW``. The
resolved path has no links in it, so meeting one on the way means one was swapped in,
and the open fails instead of following it. A walk (:func:`walk`) opens its folders
the same way and never follows a link at all: a link's target, when it is inside the
root, is met by the walk itself. A file is checked with ``lstat`` before it is opened
(only folders and regular files are), opened with ``O_NONBLOCK`` (a FIFO swapped in
would block the open) and refused after all unless ``fstat`` says it is a regular file
(a device may never end).

Platforms: Linux, macOS and the BSDs have ``dir_fd`` and ``O_NOFOLLOW`` and get all of
the above (:data:`AT_SUPPORTED`). Elsewhere (Windows) each component is checked with
``lstat`` just before it is opened by its path: links that lead out are refused as
well, but a link swapped in between that check and the open is not caught.

Names that are not UTF-8. On Linux and the BSDs a file name is bytes, and Python holds
a byte that is not part of valid UTF-8 as a lone surrogate (U+DC80-U+DCFF), which no
request to a model can carry. So the tools show names with :func:`escape_name`: such a byte
as ``\\xNN`` (``caf\\xe9.txt``), and a backslash as ``\\\\`` so that the two cannot be
confused; and they read each path they are given with :func:`unescape_path`, so a name
shown reaches its file again. (A lone ``\\`` not followed by ``\\`` or ``xNN`` is taken
as it is.) Where names are not bytes (Windows), names are shown as valid text and
paths are taken as given.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import stat
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

Folder = int | str
"""An open folder: its descriptor, or (where ``dir_fd`` is missing) its path."""

SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__"})
"""Folders that walks leave out (version control, environments, caches)."""

MAX_PATH_CHARS = 4096
"""The longest path a tool accepts (Linux's ``PATH_MAX``)."""

MAX_DEPTH = 64
"""How many folders deep a walk goes (each level holds one open descriptor)."""

MAX_WALK_ENTRIES = 1_000_000
"""How many entries of folders one walk looks at, at most."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
_BINARY = getattr(os, "O_BINARY", 0)

AT_SUPPORTED = (
    bool(_NOFOLLOW and _DIRECTORY)
    and os.open in os.supports_dir_fd
    and os.stat in os.supports_dir_fd
    and os.scandir in os.supports_fd
)
"""Whether folders are opened as descriptors and each component relative to its folder."""

# What opening a link with O_NOFOLLOW fails with: ELOOP (POSIX), EMLINK (FreeBSD).
_LINK_ERRORS = frozenset({errno.ELOOP, errno.EMLINK})


# Whether names are bytes that Python decodes with surrogateescape (POSIX), so that a
# byte that is not UTF-8 can be shown as \xNN and given back.
_ESCAPED_BYTES = os.name != "nt" and sys.getfilesystemencodeerrors() == "surrogateescape"
_TO_SHOW = re.compile("[\\\\\ud800-\udfff]")  # a backslash, or a lone surrogate
_SHOWN = re.compile(r"\\(\\|x[89a-fA-F][0-9a-fA-F])")  # \\, or \xNN of a byte past ASCII


def _show(found: re.Match[str]) -> str:
    char = found[0]
    if char == "\\":
        return "\\\\"
    if "\udc80" <= char <= "\udcff":  # a byte that is not UTF-8 (surrogateescape)
        return f"\\x{ord(char) - 0xDC00:02x}"
    return "\ufffd"  # half of a UTF-16 pair: never a POSIX name's


def escape_name(name: str) -> str:
    """``name`` (a file name or a path) as the tools show it: valid text, which
    :func:`unescape_path` turns back into ``name``. See the module's docs."""
    if name.isascii() and "\\" not in name:
        return name
    if not _ESCAPED_BYTES:
        return name.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return _TO_SHOW.sub(_show, name)


def _unshow(found: re.Match[str]) -> str:
    escape = found[1]
    return "\\" if escape == "\\" else chr(0xDC00 + int(escape[1:], 16))


def unescape_path(path: str) -> str:
    """The path that ``path``, written as :func:`escape_name` writes names, stands for."""
    if not _ESCAPED_BYTES or "\\" not in path:
        return path
    return _SHOWN.sub(_unshow, path)


class OutsideRootError(ValueError):
    """A path leads outside the root (by ``..``, as an absolute path, or through a link)."""


class NotRegularError(ValueError):
    """A path names something that is neither a folder nor a regular file."""


def resolve_inside(root: Path, path: str) -> Path:
    """``path`` (relative to ``root``, a resolved path) resolved, links followed;
    :class:`OutsideRootError` if it leaves the root."""
    if len(path) > MAX_PATH_CHARS:
        raise ValueError(f"path is {len(path):,} characters long; at most {MAX_PATH_CHARS:,}")
    resolved = (root / unescape_path(path)).resolve()
    if resolved != root and root not in resolved.parents:
        raise OutsideRootError(f"path {path!r} is outside the root {str(root)!r}")
    return resolved


def close_folder(folder: Folder) -> None:
    if isinstance(folder, int):
        os.close(folder)


def _lstat_at(folder: Folder, name: str) -> os.stat_result:
    if isinstance(folder, int):
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    return os.lstat(os.path.join(folder, name))


def open_at(folder: Folder, name: str) -> Folder | io.FileIO:
    """``name`` in ``folder``, opened without following a link: a folder, or a regular file
    (unbuffered, binary) that the caller closes.

    Raises ``OSError`` with ``errno.ELOOP`` for a link, :class:`NotRegularError` for
    anything else that is neither a folder nor a regular file, and the ``OSError`` of a
    name that is not there.
    """
    mode = _lstat_at(folder, name).st_mode
    if stat.S_ISLNK(mode):
        raise OSError(errno.ELOOP, "a symbolic link", name)
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise NotRegularError(f"{name!r} is neither a folder nor a regular file")
    if isinstance(folder, int):
        flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _NOCTTY
        fd = os.open(name, flags, dir_fd=folder)
    else:
        path = os.path.join(folder, name)
        if stat.S_ISDIR(mode):
            return path
        fd = os.open(path, os.O_RDONLY | _BINARY)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            return fd
        if stat.S_ISREG(mode):
            return io.FileIO(fd, "r")
        raise NotRegularError(f"{name!r} is neither a folder nor a regular file")
    except BaseException:  # the descriptor must not leak, whatever stops us
        os.close(fd)
        raise


def _open_root(root: Path) -> Folder:
    if AT_SUPPORTED:
        return os.open(root, os.O_RDONLY | _DIRECTORY)
    return str(root)


def _open_parts(root: Path, parts: tuple[str, ...]) -> Folder | io.FileIO:
    current: Folder | io.FileIO = _open_root(root)
    for part in parts:
        if isinstance(current, io.FileIO):  # a file where a folder was resolved
            current.close()
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", part)
        folder = current
        try:
            current = open_at(folder, part)
        finally:
            close_folder(folder)
    return current


def parts_inside(root: Path, path: str) -> tuple[str, ...]:
    """The components of ``path`` resolved, from ``root`` (none for the root itself);
    :class:`OutsideRootError` if it leaves the root."""
    return resolve_inside(root, path).relative_to(root).parts


def open_inside(root: Path, path: str) -> contextlib.AbstractContextManager[Folder | io.FileIO]:
    """What ``path`` (relative to ``root``, a resolved path) names, open: a folder, or a
    regular file (unbuffered, binary); closed on exit.

    Raises :class:`OutsideRootError` when ``path`` leads outside the root, or when a
    link appeared on the way after it was resolved (the module's docstring says why);
    :class:`NotRegularError` for what is neither a folder nor a regular file; and the
    ``OSError`` of a path that is not there.
    """
    return open_parts(root, parts_inside(root, path), path)


@contextlib.contextmanager
def open_parts(root: Path, parts: tuple[str, ...], path: str) -> Iterator[Folder | io.FileIO]:
    """:func:`open_inside` of ``path``, already resolved into ``parts`` by
    :func:`parts_inside`."""
    try:
        opened = _open_parts(root, parts)
    except NotRegularError:
        raise NotRegularError(f"{path!r} is neither a folder nor a regular file") from None
    except OSError as exc:
        if exc.errno in _LINK_ERRORS:
            raise OutsideRootError(
                f"path {path!r} changed while it was opened (a symbolic link appeared on "
                "the way): refused"
            ) from None
        # Named by the whole path given, not the component that failed.
        raise OSError(exc.errno, exc.strerror, path) from None
    try:
        yield opened
    finally:
        if isinstance(opened, io.FileIO):
            opened.close()
        else:
            close_folder(opened)


class WalkTooLarge(Exception):
    """A walk looked at :data:`MAX_WALK_ENTRIES` entries without reaching its end."""


class _Budget:
    __slots__ = ("left",)

    def __init__(self, entries: int) -> None:
        self.left = entries


def walk(
    folder: Folder, prefix: str, poll: Callable[[], None]
) -> Generator[tuple[str, Folder, str], None, None]:
    """The regular files under ``folder``: ``(prefix + their path as shown, their folder,
    their name)``, each folder's files (by name) before its sub-folders (by name).

    Links are never followed, :data:`SKIPPED_DIRS` are left out, and folders deeper than
    :data:`MAX_DEPTH` are not entered. A file's folder is open until the next item: open
    the file with :func:`open_at` before asking for it. ``poll`` is called now and then
    (``trio.from_thread.check_cancelled``), and whatever it raises ends the walk. Close
    the iterator (``contextlib.closing``) to close its folders when it is left early.

    A tree of empty folders, or one folder of millions of names, yields nothing for a
    long time: past :data:`MAX_WALK_ENTRIES` entries looked at (files, folders and what
    is left out alike), :class:`WalkTooLarge` ends the walk.
    """
    return _walk(folder, prefix, poll, 0, _Budget(MAX_WALK_ENTRIES))


def _walk(
    folder: Folder, prefix: str, poll: Callable[[], None], depth: int, budget: _Budget
) -> Generator[tuple[str, Folder, str], None, None]:
    files: list[str] = []
    folders: list[str] = []
    with os.scandir(folder) as entries:
        for count, entry in enumerate(entries):
            if count % 1024 == 0:
                poll()
            budget.left -= 1
            if budget.left < 0:
                raise WalkTooLarge(f"looked at {MAX_WALK_ENTRIES:,} entries")
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIPPED_DIRS:
                    folders.append(entry.name)
            elif entry.is_file(follow_symlinks=False):
                files.append(entry.name)
    for name in sorted(files):
        yield prefix + escape_name(name), folder, name
    if depth >= MAX_DEPTH:
        return
    for name in sorted(folders):
        poll()
        try:
            inner = open_at(folder, name)
        except (OSError, NotRegularError):
            continue  # gone, swapped for a link, or not ours to read: not walked
        if isinstance(inner, io.FileIO):
            inner.close()
            continue
        try:
            yield from _walk(inner, f"{prefix}{escape_name(name)}/", poll, depth + 1, budget)
        finally:
            close_folder(inner)


def read_start(file: io.FileIO, limit: int) -> bytes:
    """Up to ``limit`` bytes from the start of ``file`` (fewer only at its end)."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = file.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
