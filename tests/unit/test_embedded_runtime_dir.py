"""The embedded server's runtime directory (its lock file and socket directory) is made
private, and one that another user could have made or opened first is refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tickwork.db import embedded
from tickwork.errors import DatabaseError


def test_a_new_runtime_directory_is_made_0700(tmp_path: Path) -> None:
    path = tmp_path / "run"
    embedded.private_dir(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    embedded.private_dir(path)  # and taken as it is next time


@pytest.mark.parametrize("mode", [0o777, 0o755, 0o710, 0o1777])
def test_one_others_can_open_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "run"
    path.mkdir()
    path.chmod(mode)
    with pytest.raises(DatabaseError, match=f"can be opened by other users .mode {mode:04o}"):
        embedded.private_dir(path)


def test_a_link_is_refused_even_to_a_private_directory(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    target.mkdir(mode=0o700)
    (tmp_path / "run").symlink_to(target)
    with pytest.raises(DatabaseError, match="is not a directory"):
        embedded.private_dir(tmp_path / "run")


@pytest.mark.skipif(os.getuid() != 0, reason="giving a directory to another user needs root")
def test_one_another_user_made_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run"
    path.mkdir(mode=0o700)
    os.chown(path, 65534, 65534)
    with pytest.raises(DatabaseError, match="belongs to uid 65534, not to this user"):
        embedded.private_dir(path)


def test_start_refuses_before_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile = tmp_path / "run"
    hostile.mkdir()
    hostile.chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(hostile))
    with pytest.raises(DatabaseError, match="Remove it, or set XDG_RUNTIME_DIR"):
        embedded.start(tmp_path / "data")
    assert not (tmp_path / "data").exists()
