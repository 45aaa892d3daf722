"""Where a process writes: its cache folder, or nowhere."""

from ragline.runtime.caches import cache_dir, cache_file
from ragline.runtime.config import RuntimeSettings


def test_relative_cache_files_live_in_the_cache_folder_and_absolute_ones_where_they_say(tmp_path):
    folder = cache_dir(RuntimeSettings(cache_dir=str(tmp_path / "c")))
    assert folder == tmp_path / "c" and folder.is_dir()
    assert cache_file("embeddings.sqlite", folder) == str(tmp_path / "c" / "embeddings.sqlite")
    assert cache_file("/var/cache/x.sqlite", folder) == "/var/cache/x.sqlite"
    assert cache_file("", folder) == ""


def test_caches_are_off_when_asked_or_when_nothing_is_writable(tmp_path):
    assert cache_dir(RuntimeSettings(cache_dir="off")) is None
    assert cache_file("embeddings.sqlite", None) == ""
    # A folder below a plain file cannot be made, not even by root.
    (tmp_path / "file").write_text("x")
    assert cache_dir(RuntimeSettings(cache_dir=str(tmp_path / "file" / "c"))) is None
