#!/usr/bin/env bash
# Make a Docker engine available and build svc's stock images. Idempotent:
# safe to run again on a machine where everything is already in place.
#
#   - installs docker.io, mmdebstrap, openssl, openssh-client, libfaketime, iptables and e2fsprogs via apt
#     when missing
#   - starts dockerd in the background (log: /var/log/dockerd.log) when
#     `docker info` fails, with a large default address pool so many sandbox
#     networks fit
#   - waits (up to $SVC_DOCKER_WAIT seconds, default 60) for the engine
#   - builds the stock images (python -m daemon.sandbox.images build)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
WAIT=${SVC_DOCKER_WAIT:-60}
LOG=${SVC_DOCKERD_LOG:-/var/log/dockerd.log}

log() { echo "[docker.sh] $*" >&2; }

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# --- packages ---------------------------------------------------------------
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)  # the local swarm's TLS certificates (swarm/tls.py)
command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)  # the local swarm's ssh:// engines (swarm/ssh.py)
# svcd firewalls every sandbox network off from the host with iptables (fails closed without it)
if ! command -v iptables >/dev/null 2>&1 && [ ! -x /usr/sbin/iptables ] && [ ! -x /sbin/iptables ]; then
    missing+=(iptables)
fi
if ! ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1; then
    missing+=(libfaketime)
fi
# svcd enforces each workspace's disk limit with a loop-mounted ext4 (fails closed without mkfs.ext4)
if ! command -v mkfs.ext4 >/dev/null 2>&1 && [ ! -x /usr/sbin/mkfs.ext4 ] && [ ! -x /sbin/mkfs.ext4 ]; then
    missing+=(e2fsprogs)
fi
if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Keep the package's maintainer scripts from starting a dockerd of their
    # own (without our address pool): this script starts it below.
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
        $SUDO chmod 755 /usr/sbin/policy-rc.d
        policy=1
    fi
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" \
        iptables ca-certificates
    if [ -n "$policy" ]; then $SUDO rm -f /usr/sbin/policy-rc.d; fi
fi

# --- engine -----------------------------------------------------------------
if docker info >/dev/null 2>&1; then
    log "docker engine already running"
else
    if pgrep -x dockerd >/dev/null 2>&1; then
        log "dockerd process exists but does not answer yet; waiting for it"
    else
        log "starting dockerd (log: $LOG)"
        $SUDO mkdir -p "$(dirname "$LOG")"
        # Many small networks (one per sandbox) instead of Docker's ~30
        # default ones. dockerd refuses an option given both as a flag and in
        # daemon.json, so leave it to daemon.json when that sets it.
        pool=(--default-address-pool base=172.16.0.0/12,size=24)
        if grep -qs default-address-pools /etc/docker/daemon.json; then pool=(); fi
        # setsid + nohup: the engine must outlive this script and CI's shell.
        $SUDO setsid nohup dockerd "${pool[@]}" >>"$LOG" 2>&1 </dev/null &
    fi
    ok=""
    for _ in $(seq 1 "$WAIT"); do
        if docker info >/dev/null 2>&1; then ok=1; break; fi
        sleep 1
    done
    if [ -z "$ok" ]; then
        log "ERROR: the Docker engine did not come up within ${WAIT}s."
        log "last lines of $LOG:"
        tail -n 40 "$LOG" >&2 || true
        exit 1
    fi
    log "docker engine is up"
fi
docker version --format 'engine {{.Server.Version}} (API {{.Server.APIVersion}})' >&2 || true

# --- stock images -----------------------------------------------------------
if [ "${SVC_SKIP_IMAGES:-}" = 1 ]; then
    log "SVC_SKIP_IMAGES=1: not building stock images"
    exit 0
fi
if [ ! -x "$PY" ]; then
    log "no python at $PY; create the venv first (.ci/run does)"
    exit 1
fi
start=$(date +%s)
"$PY" -m daemon.sandbox.images build
log "stock images ready in $(( $(date +%s) - start ))s"
