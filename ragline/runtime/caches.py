"""Where a process may write: one cache folder (RAGLINE_CACHE_DIR) for the embedding caches and jieba's dictionary
cache. An installed service runs from a read-only working directory, as a user without a home, so nothing is written
relative to the working directory; when no folder is writable, caching is off and the service still starts."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from ragline.runtime.config import RuntimeSettings

log = logging.getLogger(__name__)


def cache_dir(settings: RuntimeSettings) -> Path | None:
    """The cache folder, created if need be; None when caching is off or no folder can be written."""
    if settings.cache_dir == "off":
        return None
    try:
        folder = Path(settings.cache_dir) if settings.cache_dir else Path(tempfile.gettempdir()) / "ragline"
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # gettempdir raises when no temporary folder is writable
        log.warning("no writable cache folder (%s): caches are off", exc)
        return None
    if not os.access(folder, os.W_OK):
        log.warning("cache folder %s is not writable: caches are off", folder)
        return None
    return folder


def cache_file(name: str, folder: Path | None) -> str:
    """A cache file's path: '' (off) for an empty name or no folder, an absolute name as given, else inside the folder."""
    if not name or (folder is None and not Path(name).is_absolute()):
        return ""
    return name if Path(name).is_absolute() else str(folder / name)


def configure_jieba(folder: Path | None) -> None:
    """jieba keeps its dictionary cache in the cache folder; with none, its (caught) write fails instead of its lookup
    of a temporary folder raising."""
    import jieba

    jieba.dt.tmp_dir = str(folder) if folder is not None else os.devnull
