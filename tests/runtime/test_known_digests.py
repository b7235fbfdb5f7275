"""Known digests (docs/data.md): a Parquet file only the user can write is parsed from itself and
hashed once per state (runtime/digest_cache.py), and nothing an attacker (or an accident) does to
the file or the cache gives an identity other than the SHA-256 of the bytes parsed: the true
identity, or a hash."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from cli_runs import fz, prog

from fuzzpy.ledger import Ledger
from fuzzpy.runtime import data as data_module
from fuzzpy.runtime import digest_cache
from fuzzpy.runtime.data import load_identified
from fuzzpy.runtime.digest_cache import DigestCache, file_state, open_digest_cache
from fuzzpy.typesystem.types import Column, Num, Schema

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="the cache needs file owners (POSIX)")

SCHEMA = Schema("T", [Column("x", Num(0, 100, integer=True))])
OLD = 10**9 * 1_000_000  # a time long past (ns): the file is settled


def sha256_identity(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def write_parquet(path: Path, values: list[int], *, settled: bool = True) -> Path:
    pd.DataFrame({"x": values}).to_parquet(path, index=False)
    if settled:
        os.utime(path, ns=(OLD, OLD))  # mtime long past; the ctime is the kernel's (now)
    return path


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("FUZZPY_CACHE_DIR", str(folder))
    monkeypatch.delenv("FUZZPY_NO_CACHE", raising=False)
    monkeypatch.setattr(digest_cache, "SETTLE_NS", 0)  # files written by the test count as settled
    return folder


@pytest.fixture()
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The hashes of a whole file computed (a miss): "stream" while Arrow reads the file itself,
    "snapshot" from a copy in memory."""
    calls: list[str] = []
    for name, kind in (("StreamedIdentity", "stream"), ("BackgroundIdentity", "snapshot")):
        real = getattr(data_module, name)

        def counting(source, real=real, kind=kind):
            calls.append(kind)
            return real(source)

        monkeypatch.setattr(data_module, name, counting)
    return calls


def load(path: Path) -> tuple[pd.DataFrame, str]:
    return load_identified(path, SCHEMA, known_digests=True)


def entries(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "digests").glob("*.digest"))


def test_a_second_load_of_an_unchanged_file_is_a_hit_with_the_same_identity_and_table(cache_dir, hashed, tmp_path):
    path = write_parquet(tmp_path / "d.parquet", [1, 2, 3, 200])
    first, first_id = load(path)
    second, second_id = load(path)
    assert hashed == ["stream"]
    assert first_id == second_id == sha256_identity(path)
    pd.testing.assert_frame_equal(first, second)
    assert len(entries(cache_dir)) == 1


def test_without_known_digests_nothing_is_looked_up_or_recorded(cache_dir, hashed, tmp_path):
    path = write_parquet(tmp_path / "d.parquet", [1, 2])
    for _ in range(2):
        assert load_identified(path, SCHEMA)[1] == sha256_identity(path)
    assert hashed == ["snapshot", "snapshot"]
    assert not (cache_dir / "digests").exists()


def test_without_a_cache_folder_every_load_hashes_the_file(cache_dir, hashed, tmp_path, monkeypatch):
    monkeypatch.setenv("FUZZPY_NO_CACHE", "1")
    path = write_parquet(tmp_path / "d.parquet", [1, 2])
    for _ in range(2):
        assert load(path)[1] == sha256_identity(path)
    assert hashed == ["stream", "stream"]


def test_a_file_changed_in_place_with_its_size_and_mtime_restored_is_a_miss(cache_dir, hashed, tmp_path):
    path = write_parquet(tmp_path / "d.parquet", [1, 2, 3])
    load(path)
    before = os.stat(path)
    edited = write_parquet(tmp_path / "edited.parquet", [1, 2, 4]).read_bytes()
    assert len(edited) == before.st_size and edited != path.read_bytes()
    time.sleep(0.05)  # past a tick of the kernel's coarse clock, as SETTLE_NS ensures outside tests
    with open(path, "r+b") as f:  # same inode, same size, other bytes
        f.write(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_ino == before.st_ino and os.stat(path).st_mtime_ns == before.st_mtime_ns
    frame, identity = load(path)
    assert hashed == ["stream", "stream"]  # not taken from the cache
    assert identity == sha256_identity(path)
    assert list(frame.x) == [1, 2, 4]


def test_a_file_replaced_at_the_same_path_is_hashed_afresh(cache_dir, hashed, tmp_path):
    path = write_parquet(tmp_path / "d.parquet", [1, 2, 3])
    old = os.stat(path)
    load(path)
    other = write_parquet(tmp_path / "other.parquet", [4, 5, 6])
    os.utime(other, ns=(old.st_atime_ns, old.st_mtime_ns))
    os.replace(other, path)
    frame, identity = load(path)
    assert identity == sha256_identity(path)
    assert list(frame.x) == [4, 5, 6]
    assert hashed == ["stream", "stream"]


def test_a_swapped_symlink_gives_the_identity_of_the_file_it_now_names(cache_dir, hashed, tmp_path):
    a = write_parquet(tmp_path / "a.parquet", [1, 2, 3])
    b = write_parquet(tmp_path / "b.parquet", [7, 8, 9])
    link = tmp_path / "link.parquet"
    link.symlink_to(a)
    assert load(link)[1] == sha256_identity(a)
    link.unlink()
    link.symlink_to(b)
    frame, identity = load(link)
    assert identity == sha256_identity(b)
    assert list(frame.x) == [7, 8, 9]


def test_a_forged_entry_is_a_miss(cache_dir, hashed, tmp_path):
    path = write_parquet(tmp_path / "d.parquet", [1, 2, 3])
    load(path)
    [entry] = entries(cache_dir)
    blob = entry.read_bytes()
    forged = blob[: blob.rindex(b"\n") + 1] + b"sha256:" + b"0" * 64  # another identity, the old tag
    entry.write_bytes(forged)
    assert load(path)[1] == sha256_identity(path)
    # An entry tagged with another key (written by someone without this user's key) is ignored.
    cache = DigestCache(cache_dir / "digests", b"k" * 32)
    with open(path, "rb") as f:
        state = file_state(f, path)
    assert state is not None
    body = DigestCache._material(state) + b"\nsha256:" + b"1" * 64
    entry.write_bytes(digest_cache.MAGIC + cache._tag(body) + body)
    assert load(path)[1] == sha256_identity(path)
    assert hashed == ["stream"] * 3


@pytest.mark.parametrize("damage", [b"", b"FZDIGST1", b"garbage" * 10, None])
def test_a_damaged_entry_is_a_miss(cache_dir, hashed, tmp_path, damage):
    path = write_parquet(tmp_path / "d.parquet", [1, 2, 3])
    load(path)
    [entry] = entries(cache_dir)
    blob = entry.read_bytes()
    entry.write_bytes(blob[:-3] if damage is None else damage)
    assert load(path)[1] == sha256_identity(path)
    assert hashed == ["stream", "stream"]


def test_an_entry_for_one_state_is_not_taken_for_another(cache_dir, tmp_path):
    """An authenticated entry copied under another state's name is refused: the material inside
    must be the state looked up."""
    path = write_parquet(tmp_path / "d.parquet", [1, 2, 3])
    cache = open_digest_cache()
    assert cache is not None
    with open(path, "rb") as f:
        state = file_state(f, path)
        assert state is not None
        assert cache.record(state, f, "sha256:" + "a" * 64)
    [entry] = entries(cache_dir)
    other = digest_cache.FileState(state.path, state.device, state.inode, state.size, state.mtime_ns,
                                   state.ctime_ns + 1)
    entry.rename(cache._entry(DigestCache._material(other)))
    assert cache.lookup(other) is None
    assert cache.lookup(state) is None


def test_a_cache_folder_others_can_write_is_not_used(cache_dir, hashed, tmp_path):
    path = write_parquet(tmp_path / "d.parquet", [1, 2, 3])
    load(path)
    (cache_dir / "digests").chmod(0o777)
    assert open_digest_cache() is None
    assert load(path)[1] == sha256_identity(path)
    assert hashed == ["stream", "stream"]


def test_a_file_others_can_write_is_never_cached(cache_dir, hashed, tmp_path):
    path = write_parquet(tmp_path / "d.parquet", [1, 2, 3])
    path.chmod(0o666)
    for _ in range(2):
        assert load(path)[1] == sha256_identity(path)
    assert hashed == ["snapshot", "snapshot"]
    assert entries(cache_dir) == []


def test_a_file_changed_moments_ago_is_not_recorded(cache_dir, hashed, tmp_path, monkeypatch):
    """A write in the same tick of a coarse clock could leave the state as it was: only a file
    settled for SETTLE_NS is recorded."""
    monkeypatch.setattr(digest_cache, "SETTLE_NS", 2_000_000_000)
    path = write_parquet(tmp_path / "d.parquet", [1, 2, 3], settled=False)
    for _ in range(2):
        assert load(path)[1] == sha256_identity(path)
    assert hashed == ["snapshot", "snapshot"]
    assert entries(cache_dir) == []


def test_a_file_changed_while_it_is_hashed_is_read_from_a_snapshot_and_not_recorded(cache_dir, hashed, tmp_path,
                                                                                     monkeypatch):
    path = write_parquet(tmp_path / "d.parquet", [1, 2, 3])
    real = data_module.StreamedIdentity

    def hash_then_touch(fd):
        hashing = real(fd)
        hashing.result()
        time.sleep(0.05)  # past a tick of the kernel's coarse clock
        os.chmod(path, 0o600)  # any change of the inode moves its ctime
        return hashing

    monkeypatch.setattr(data_module, "StreamedIdentity", hash_then_touch)
    frame, identity = load(path)
    assert identity == sha256_identity(path)
    assert list(frame.x) == [1, 2, 3]
    assert hashed == ["stream", "snapshot"]  # the streamed hash was not believed: parsed again
    assert entries(cache_dir) == []


def test_a_file_changed_while_a_hit_is_parsed_is_read_and_hashed_again(cache_dir, hashed, tmp_path, monkeypatch):
    path = write_parquet(tmp_path / "d.parquet", [1, 2, 3])
    load(path)
    real = data_module._conform
    replacement = write_parquet(tmp_path / "new.parquet", [9, 9, 9, 9])

    def conform_then_rewrite(*args, **kwargs):
        frame = real(*args, **kwargs)
        if len(hashed) == 1:  # the hit's parse: the file is rewritten in place meanwhile
            path.write_bytes(replacement.read_bytes())
        return frame

    monkeypatch.setattr(data_module, "_conform", conform_then_rewrite)
    frame, identity = load(path)
    assert hashed == ["stream", "snapshot"]
    assert identity == sha256_identity(path)
    assert list(frame.x) == [9, 9, 9, 9]


def test_concurrent_runs_writing_the_cache_leave_a_true_entry(cache_dir, tmp_path):
    path = write_parquet(tmp_path / "d.parquet", list(range(50)))
    results: list[str] = []

    def run() -> None:
        for _ in range(5):
            results.append(load(path)[1])

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(results) == {sha256_identity(path)}
    assert len(entries(cache_dir)) == 1
    assert not list((cache_dir / "digests").glob(".*.tmp"))
    assert load(path)[1] == sha256_identity(path)


def test_a_csv_file_is_always_hashed(cache_dir, tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("x\n1\n2\n")
    os.utime(path, ns=(OLD, OLD))
    for _ in range(2):
        assert load_identified(path, SCHEMA, header=True, known_digests=True)[1] == sha256_identity(path)
    assert entries(cache_dir) == []


def test_a_file_of_many_reads_is_hashed_whole_while_its_columns_are_parsed(cache_dir, hashed, tmp_path):
    path = tmp_path / "big.parquet"
    pd.DataFrame({"x": [i % 101 for i in range(600_000)],
                  "noise": [f"{i * 7919 % 1000003}" for i in range(600_000)]}).to_parquet(path, index=False)
    os.utime(path, ns=(OLD, OLD))
    assert path.stat().st_size > 3 << 20  # several reads of the hashing thread
    frame, identity = load(path)
    assert identity == sha256_identity(path)
    assert hashed == ["stream"]
    pd.testing.assert_frame_equal(frame, load_identified(path, SCHEMA)[0])


def test_a_file_parsed_from_itself_gives_the_table_a_snapshot_gives(cache_dir, hashed, tmp_path):
    schema = Schema("T", [Column("x", Num(0, 100, integer=True), on_invalid="drop"),
                          Column("w", Num(-1, 1), on_invalid="default", default=0)])
    path = tmp_path / "d.parquet"
    pd.DataFrame({"x": [1, None, 300, 4, 5], "w": [0.5, 2.0, None, -3.0, 0.25]}).to_parquet(path, index=False)
    os.utime(path, ns=(OLD, OLD))
    for _ in range(2):  # a miss, then a hit
        by_state = load_identified(path, schema, known_digests=True)
        snapshot = load_identified(path, schema)
        pd.testing.assert_frame_equal(by_state[0], snapshot[0])
        assert by_state[1] == snapshot[1] == sha256_identity(path)
    assert hashed == ["stream", "snapshot", "snapshot"]


def test_charged_runs_book_the_files_sha256_whether_it_was_hashed_or_known(cache_dir, hashed, tmp_path, monkeypatch):
    monkeypatch.setenv("FUZZPY_LEDGER", str(tmp_path / "env-ledger.sqlite"))
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 0.5 (count db) }")
    path = tmp_path / "db.parquet"
    pd.DataFrame({"x": [1.0, 2.0], "k": ["a", "b"], "flag": [True, False], "n": [1, 2]}).to_parquet(path, index=False)
    os.utime(path, ns=(OLD, OLD))
    book = tmp_path / "l.sqlite"
    for _ in range(2):
        assert fz("run", program, "--data", path, "--budget", "1", "--ledger", book).exit_code == 0
    assert hashed == ["stream"]  # the second run took the identity the first recorded
    with Ledger(book) as ledger:
        assert ledger.datasets() == [sha256_identity(path)]
        assert ledger.spent(sha256_identity(path)) == Fraction(1)
