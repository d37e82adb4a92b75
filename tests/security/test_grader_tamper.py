"""A grader the agent never touched (daemon/sandbox/toolset.py, daemon/sandbox/verifier.py): the
agent is root in its container, so it can replace or shadow any program there. The keep-alive, the
leftover reaper and every check's shell and timeout are the daemon's read-only toolset; a command
check in a container whose programs the agent replaced is not trusted (`environment_tampered`)
unless it runs `isolation: clean`; an agent that stops its own container fails."""
from __future__ import annotations

import pytest

from tests.support.runs import cli_spec, inv, result, run_spec

pytestmark = pytest.mark.asyncio(loop_scope="module")

ANSWER_IS_42 = 'test "$(cat answer.txt)" = 42'
# A shell first on PATH that answers the reaper with "0 0" and exits 0 for everything else.
FAKE_SH = ("mkdir -p /usr/local/sbin && printf '#!/bin/dash\\necho 0 0\\nexit 0\\n' > /usr/local/sbin/sh "
           "&& chmod 755 /usr/local/sbin/sh")
WRONG_ANSWER = "echo 41 > answer.txt"


def answer_check(isolation: str | None = None) -> dict:
    check = {"type": "command_exit", "command": ANSWER_IS_42}
    if isolation:
        check["isolation"] = isolation
    return inv(check)


async def test_a_shadowed_shell_cannot_forge_a_pass(engine_api):
    doc = cli_spec("tamper-fake-sh", f"{WRONG_ANSWER}; {FAKE_SH}", {"answer": answer_check()})
    run = await run_spec(engine_api, doc)
    assert (run["status"], run["reason"]) == ("errored", "environment_tampered"), run


async def test_the_tampered_error_names_the_planted_program(engine_api):
    doc = cli_spec("tamper-names", f"{WRONG_ANSWER}; {FAKE_SH}", {"answer": answer_check()})
    run = await run_spec(engine_api, doc)
    assert "/usr/local/sbin/sh" in run["error"]["message"], run


async def test_a_replaced_system_program_is_tampering(engine_api):
    replace_cat = f"{WRONG_ANSWER}; printf '#!/bin/sh\\necho 42\\n' > /usr/bin/cat"
    doc = cli_spec("tamper-cat", replace_cat, {"answer": answer_check()})
    run = await run_spec(engine_api, doc)
    assert run["reason"] == "environment_tampered", run


async def test_a_clean_check_in_a_tampered_container_gives_the_honest_verdict(engine_api):
    doc = cli_spec("tamper-clean", f"{WRONG_ANSWER}; {FAKE_SH}; printf '#!/bin/sh\\necho 42\\n' > /usr/bin/cat",
                   {"answer": answer_check("clean")})
    run = await run_spec(engine_api, doc)
    assert (run["status"], result(run, "answer")["status"]) == ("failed", "failed"), run


async def test_a_clean_check_passes_an_honest_answer(engine_api):
    doc = cli_spec("tamper-clean-honest", "echo 42 > answer.txt", {"answer": answer_check("clean")})
    run = await run_spec(engine_api, doc)
    assert run["status"] == "passed", run


async def test_a_clean_check_reaches_the_sandbox_services(engine_api):
    check = inv({"type": "command_exit", "isolation": "clean",
                 "command": 'test "$(redis-cli -h cache GET answer)" = 42'})
    doc = cli_spec("tamper-clean-services", "redis-cli -h cache SET answer 42", {"answer": check},
                   services=[{"name": "cache", "type": "redis"}])
    run = await run_spec(engine_api, doc)
    assert run["status"] == "passed", run


async def test_installing_new_programs_is_not_tampering(engine_api):
    install = "printf '#!/bin/sh\\necho hi\\n' > /usr/local/bin/svc-new-tool && chmod 755 /usr/local/bin/svc-new-tool"
    doc = cli_spec("tamper-install", f"echo 42 > answer.txt; {install}",
                   {"answer": answer_check(), "tool": inv({"type": "command_exit", "command": "svc-new-tool"})})
    run = await run_spec(engine_api, doc)
    assert run["status"] == "passed", run


async def test_a_fake_shell_does_not_spare_a_background_writer(engine_api):
    writer = "(sleep 2; echo 42 > answer.txt) >/dev/null 2>&1 &"
    slow = inv({"type": "command_exit", "command": "sleep 3", "isolation": "clean"})
    doc = cli_spec("tamper-reaper", f"{WRONG_ANSWER}; {FAKE_SH}; {writer} exit 0",
                   {"slow": slow, "answer": inv({"type": "file_content", "path": "answer.txt", "contains": "42"})})
    run = await run_spec(engine_api, doc)
    assert result(run, "answer")["status"] == "failed", run


async def test_a_replaced_sleep_gives_the_agent_no_process_after_it_ends(engine_api):
    # round 2's keep-alive looped on the image's `sleep`: once the agent replaced it and killed the
    # running one, the keep-alive started the agent's program, which the reaper spared
    writer = """echo 'import time; time.sleep(2); open("/workspace/answer.txt", "w").write("42")' > /tmp/w.py"""
    fake_sleep = ("printf '#!/bin/dash\\n/usr/bin/python3 /tmp/w.py >/dev/null 2>&1 &\\n' > /tmp/sleep && "
                  "chmod 755 /tmp/sleep && cp /tmp/sleep /usr/bin/sleep")
    kill_keepalive_children = ("for p in $(cat /proc/1/task/1/children); do "
                               "for c in $(cat /proc/$p/task/$p/children); do kill -9 $c; done; done")
    slow = inv({"type": "command_exit", "command": "sleep 3", "isolation": "clean"})
    doc = cli_spec("tamper-sleep", f"{WRONG_ANSWER}; {writer}; {fake_sleep}; {kill_keepalive_children}; exit 0",
                   {"slow": slow, "answer": inv({"type": "file_content", "path": "answer.txt", "contains": "42"})})
    run = await run_spec(engine_api, doc)
    assert result(run, "answer")["status"] == "failed", run


async def test_an_agent_that_stops_its_own_container_fails(engine_api):
    stop_keepalive = "kill -TERM $(cat /proc/1/task/1/children)"
    doc = cli_spec("tamper-stop", f"{WRONG_ANSWER}; {stop_keepalive}; sleep 5",
                   {"answer": inv({"type": "file_content", "path": "answer.txt", "contains": "42"})})
    run = await run_spec(engine_api, doc)
    assert (run["status"], run["verdict"]) == ("failed", "fail"), (run.get("error"), run.get("reason"))


async def test_a_program_replaced_while_the_checks_run_voids_them(engine_api):
    # agent.keep_running leaves the agent's processes beside the checks: one swaps `cat` once the
    # first check started, and puts it back before the run ends
    swap = ("(sleep 1; cp /usr/bin/cat /tmp/real-cat; printf '#!/bin/sh\\necho 42\\n' > /usr/bin/cat; sleep 3; "
            "cp /tmp/real-cat /usr/bin/cat) >/dev/null 2>&1 &")
    checks = {"slow": inv({"type": "command_exit", "command": "sleep 2"}), "answer": answer_check()}
    doc = cli_spec("tamper-during-checks", f"{WRONG_ANSWER}; {swap} exit 0", checks)
    doc["agent"]["keep_running"] = True
    run = await run_spec(engine_api, doc)
    assert (run["status"], run["reason"]) == ("errored", "environment_tampered"), run
