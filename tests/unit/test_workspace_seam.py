"""The workspace seam (host_workspace.HostWorkspace) on a real host directory: what the daemon reads
and archives of a workspace never follows a link the agent left."""
from __future__ import annotations

import os
import tarfile

import pytest

from daemon.sandbox import workspace as ws
from daemon.sandbox.host_workspace import HostWorkspace


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('hi')\n")
    (tmp_path / ".svc").mkdir()
    (tmp_path / ".svc" / "task.json").write_text("{}")
    os.symlink("/etc", tmp_path / "etc")
    return tmp_path


async def test_the_archive_keeps_links_as_links_and_leaves_out_the_daemons_area(tree, tmp_path_factory):
    target = tmp_path_factory.mktemp("out") / "snapshot.tar.gz"
    await HostWorkspace().archive(tree, target)
    with tarfile.open(target) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert sorted(members) == ["workspace", "workspace/etc", "workspace/src", "workspace/src/app.py"]
    assert members["workspace/etc"].issym() and members["workspace/etc"].linkname == "/etc"


async def test_a_read_through_a_link_is_refused(tree):
    with pytest.raises(ws.PathError):
        await HostWorkspace().read(tree, "etc/hostname")
