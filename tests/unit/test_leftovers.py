"""`svc doctor`'s leftovers rules and its detector of the engine's start-up panic in its network
store (client/setup/leftovers.py)."""
from __future__ import annotations

from client.setup.leftovers import NETWORK_STORE, NETWORK_STORE_FIX, classify, network_store_panic

# Docker 20.10.23+ on Debian (moby/moby#45057), as `journalctl -u docker -o cat` prints a start that
# dies restoring a bridge network whose creation a stop interrupted (its record in local-kv.db has
# no IPAM pool); every later start dies the same way until the store is set aside.
PANIC_START = """\
time="2024-03-11T09:12:40.101932841Z" level=info msg="Starting up"
time="2024-03-11T09:12:40.129817004Z" level=info msg="[graphdriver] using prior storage driver: overlay2"
time="2024-03-11T09:12:40.142279377Z" level=info msg="Loading containers: start."
panic: runtime error: index out of range [0] with length 0

goroutine 1 [running]:
github.com/docker/docker/libnetwork/drivers/bridge.(*driver).createNetwork(0xc000b62000, 0xc00053e700)
	/build/docker.io-20.10.24+dfsg1/.gopath/src/github.com/docker/docker/libnetwork/drivers/bridge/bridge.go:705 +0x1e5a
github.com/docker/docker/libnetwork/drivers/bridge.(*driver).populateNetworks(0xc000b62000)
	/build/docker.io-20.10.24+dfsg1/.gopath/src/github.com/docker/docker/libnetwork/drivers/bridge/bridge_store.go:55 +0x2d1
github.com/docker/docker/libnetwork.New(0xc000d1e800, 0x11, 0x20)
	/build/docker.io-20.10.24+dfsg1/.gopath/src/github.com/docker/docker/libnetwork/controller.go:230 +0x8d6
github.com/docker/docker/daemon.(*Daemon).initNetworkController(0xc0001a4000, 0xc0005c4000, 0xc000d2e4b0)
	/build/docker.io-20.10.24+dfsg1/.gopath/src/github.com/docker/docker/daemon/daemon_unix.go:855 +0xa9
"""

HEALTHY_START = """\
time="2024-03-11T09:20:01.000000000Z" level=info msg="Starting up"
time="2024-03-11T09:20:01.500000000Z" level=info msg="Loading containers: done."
time="2024-03-11T09:20:01.600000000Z" level=info msg="Daemon has completed initialization"
time="2024-03-11T09:20:01.700000000Z" level=info msg="API listen on /var/run/docker.sock"
"""


def test_the_network_store_panic_is_detected_with_its_fix_named():
    assert network_store_panic(HEALTHY_START + PANIC_START) == "panic: runtime error: index out of range [0] with length 0"
    assert NETWORK_STORE in NETWORK_STORE_FIX and "mv " in NETWORK_STORE_FIX


def test_a_start_that_got_past_an_earlier_panic_is_healthy():
    assert network_store_panic(PANIC_START + HEALTHY_START) is None
    assert network_store_panic(HEALTHY_START) is None


def test_a_panic_elsewhere_is_not_the_network_store():
    other = PANIC_START.replace("libnetwork/drivers/bridge", "daemon/cluster").replace("libnetwork", "daemon")
    assert network_store_panic(other) is None
    served = 'time="x" level=info msg="Starting up"\nhttp: panic serving @: runtime error: index out of range\n' \
             "github.com/docker/docker/libnetwork.(*controller).x\n"
    assert network_store_panic(served) is None


def objects(daemon: str, sandbox: str, state: str = "exited", **extra: str) -> tuple[dict, dict, dict]:
    labels = {"svc.daemon": daemon, "svc.sandbox": sandbox, **extra}
    return ({"Id": f"c-{daemon}-{sandbox}", "State": state, "Labels": labels},
            {"Id": f"n-{daemon}-{sandbox}", "Labels": labels}, {"Name": f"v-{daemon}-{sandbox}", "Labels": labels})


def test_leftovers_are_gone_daemons_objects_never_a_live_ones():
    running_c, running_n, running_v = objects("dmn_live", "sb-1", "running")
    home_c, home_n, home_v = objects("dmn_home", "sb-2", "running")  # this home's daemon, not running: killed
    dead_c, dead_n, dead_v = objects("dmn_dead", "sb-3")
    other_c, other_n, other_v = objects("dmn_other", "sb-4", "running")  # maybe another home's live daemon
    build = {"Id": "c-build", "State": "exited", "Labels": {"svc.role": "agent-layer-build"}}
    building = {"Id": "c-building", "State": "running", "Labels": {"svc.role": "agent-layer-build"}}
    young_c, young_n, young_v = objects("dmn_young", "sb-5", "created")  # a live daemon booting a sandbox
    young_c["Created"] = 1000 - 5
    for obj in (running_c, home_c, dead_c, other_c, build, building):
        obj.setdefault("Created", 1000 - 3600)
    for obj in (running_n, home_n, dead_n, other_n, running_v, home_v, dead_v, other_v):
        obj["Created"] = "1970-01-01T00:00:00.000000001Z"
    young_n["Created"], young_v["CreatedAt"] = "1970-01-01T00:16:38.5+00:00", "1970-01-01T00:16:38Z"
    found = classify([running_c, home_c, dead_c, other_c, build, building, young_c],
                     [running_n, home_n, dead_n, other_n, young_n], [running_v, home_v, dead_v, other_v, young_v],
                     running_daemon="dmn_live", home_daemon="dmn_home", now=1000.0)
    assert sorted(found.containers) == ["c-build", "c-dmn_dead-sb-3", "c-dmn_home-sb-2"]
    assert sorted(found.networks) == ["n-dmn_dead-sb-3", "n-dmn_home-sb-2"]
    assert sorted(found.volumes) == ["v-dmn_dead-sb-3", "v-dmn_home-sb-2"]
    assert sorted(found.daemons) == ["dmn_dead", "dmn_home"]
    assert [s.split(":")[0] for s in found.spared] == ["dmn_other", "dmn_young"]
    # the home daemon running again: its objects are its sweep's, not doctor's
    again = classify([home_c], [home_n], [home_v], running_daemon="dmn_home", home_daemon="dmn_home")
    assert again.count() == 0
