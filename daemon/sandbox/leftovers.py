"""Stopping what the agent left running when it ended.

An agent can end with `(sleep 2; echo pass > /workspace/answer) & exit 0`: a leftover that writes
after the after-snapshot, reads `/workspace/.svc/expected.json` once it appears, or commits db writes
after the last audit drain. So before anything is measured, every process in the agent container
but its keep-alive is stopped (SIGSTOP to all, so none can fork while the rest are killed, then
SIGKILL; repeated until a round finds none), and every database session of the agent's role is
ended and its logins refused (`db_audit.end_agent_sessions`).

The keep-alive (boot.AGENT_INIT, the toolset's `sleep`) is the child of PID 1 (docker-init) that
started first: a process the agent starts can take any name and command line, but never an earlier
start time. It starts nothing, so killing it ends the container (the agent's failure) rather than
handing the agent a process the reaper spares. The reaper runs with the toolset's shell and PATH
(daemon/sandbox/toolset.py): no program of the agent's container answers for it.
"""
from __future__ import annotations

# POSIX sh over /proc only, run by the toolset's busybox sh. Prints the number of processes killed
# and the number left. `$$` and its children (the command substitutions) are the reaper itself.
REAPER_SH = r"""
me=$$
ppid_of() {  # sets $pp and $st (the state letter) without a fork
  pp=""
  st=""
  while read -r k v rest; do
    case "$k" in
      State:) st=$v ;;
      PPid:) pp=$v; return 0 ;;
    esac
  done < "$1/status" 2>/dev/null
  return 1
}
keep=""
best=""
for d in /proc/[0-9]*; do
  ppid_of "$d" || continue
  [ "$pp" = 1 ] || continue
  read -r s < "$d/stat" 2>/dev/null || continue
  s=${s##*) }
  set -- $s
  t=${20}
  if [ -z "$best" ] || [ "$t" -lt "$best" ]; then best=$t; keep=${d#/proc/}; fi
done
victims() {
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$p" in 1|"$me"|"$keep") continue ;; esac
    ppid_of "$d" || continue
    case "$pp" in "$me"|"$keep"|"") continue ;; esac
    [ "$st" = Z ] && continue  # already dead, waiting for docker-init to reap it
    echo "$p"
  done
}
total=0
round=0
while [ "$round" -lt 20 ]; do
  round=$((round + 1))
  list=$(victims)
  [ -n "$list" ] || break
  for p in $list; do kill -STOP "$p" 2>/dev/null; done
  list=$(victims)
  for p in $list; do kill -KILL "$p" 2>/dev/null && total=$((total + 1)); done
  sleep 0.05
done
left=0
for p in $(victims); do left=$((left + 1)); done
echo "$total $left"
"""


def parse_reaper_output(text: str) -> tuple[int, int]:
    """(processes killed, processes still there) from REAPER_SH's last line; (0, -1) when unreadable."""
    parts = text.strip().splitlines()[-1:] if text.strip() else []
    try:
        killed, left = parts[0].split()
        return int(killed), int(left)
    except (IndexError, ValueError):
        return 0, -1
