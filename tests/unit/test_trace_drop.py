"""In-agent traces from a swarm node travel as a drop file (daemon/traces/drop.py): the SDK's
`file://` transport writes one batch per line, and the daemon reads back only what is new, from
regular files of the expected names, never through a link, a line still being written left for the
next read. What comes back from a node is untrusted."""
from __future__ import annotations

import json
import os

from client.tracing.sdk import Tracer
from daemon.traces.drop import _new_lines


def test_the_sdk_drops_each_batch_as_a_line_and_the_daemon_reads_only_what_is_new(tmp_path):
    tracer = Tracer(base_url=f"file://{tmp_path}", sandbox_id="sbx_1", sandbox_token="t", interval_s=0.01)
    tracer.emit({"type": "start", "span_id": "a", "trace_id": "t1", "name": "solve"})
    assert tracer.flush(5)
    done: dict[str, int] = {}
    first = _new_lines(tmp_path, done)
    tracer.emit({"type": "end", "span_id": "a", "trace_id": "t1", "name": "solve"})
    assert tracer.flush(5)
    second = _new_lines(tmp_path, done)
    names = [[e["type"] for e in body["events"]] for body in first + second]
    assert (names, _new_lines(tmp_path, done), os.listdir(tmp_path)) == ([["start"], ["end"]], [], [f"spans-{os.getpid()}.jsonl"])


def test_links_other_names_and_a_half_written_line_are_not_read(tmp_path):
    secret = tmp_path.parent / f"{tmp_path.name}-host-secret.jsonl"
    secret.write_text(json.dumps({"events": [{"type": "start", "name": "from-the-host"}]}) + "\n")
    (tmp_path / "spans-1.jsonl").symlink_to(secret)  # a link planted by the agent: not followed
    (tmp_path / "notes.jsonl").write_text(json.dumps({"events": []}) + "\n")
    (tmp_path / "spans-2.jsonl").write_text(json.dumps({"events": [{"type": "start", "name": "kept"}]}) + "\n"
                                            + '{"events": [{"type": "end"')  # the SDK is mid-write
    done: dict[str, int] = {}
    read = _new_lines(tmp_path, done)
    assert [e["name"] for body in read for e in body["events"]] == ["kept"]
