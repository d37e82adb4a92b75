#!/bin/sh
# A swarm node (dockerd) or the cluster's registry, in one image.
set -e
if [ "$1" = registry ]; then
    # No auth: the registry is reachable only on the cluster's own bridge network.
    cat >/etc/docker/registry/svc.yml <<'YML'
version: 0.1
storage:
  filesystem:
    rootdirectory: /var/lib/docker-registry
http:
  addr: :5000
YML
    exec docker-registry serve /etc/docker/registry/svc.yml
fi
# cgroup v1: the outer engine mounts the controllers read-only in a container
# that is not --privileged, and they cannot be remounted read-write. The node
# runs in its own cgroup namespace (--cgroupns private), so a fresh mount of
# each hierarchy is rooted at the node's own cgroup.
grep ' /sys/fs/cgroup/' /proc/self/mounts | while read -r _ dir type opts _; do
    [ "$type" = cgroup ] || continue
    case "$opts" in ro,*) ;; *) continue ;; esac
    ctrls=$(echo "$opts" | tr , '\n' | grep -vxE 'ro|rw|nosuid|nodev|noexec|relatime' | paste -sd, -)
    case "$ctrls" in name=*) ctrls="none,$ctrls" ;; esac
    umount "$dir" && mount -t cgroup -o "$ctrls" cgroup "$dir"
done
# a restarted node: state of the engine that was killed (a stale containerd pid stops dockerd)
rm -rf /var/run/docker /var/run/docker.pid /var/run/docker.sock
# The engine's API is root on this node: over tcp it answers only clients the swarm's CA signed
# (swarm/tls.py; the certificates are copied to /etc/svc-tls before the node starts).
for f in ca.pem server-cert.pem server-key.pem; do
    [ -s "/etc/svc-tls/$f" ] || { echo "node: /etc/svc-tls/$f is missing (swarm/cluster.py copies it in)" >&2; exit 1; }
done
# ssh:// access to the engine's socket (swarm/ssh.py): key only, with the cluster's own host key. svcd
# forwards a local socket to /var/run/docker.sock (sshd ties that to AllowTcpForwarding, so it stays on).
if [ -s /etc/svc-ssh/authorized_keys ]; then
    install -d -m 700 /root/.ssh /run/sshd
    install -m 600 /etc/svc-ssh/authorized_keys /root/.ssh/authorized_keys
    chmod 600 /etc/svc-ssh/ssh_host_ed25519_key
    /usr/sbin/sshd -o HostKey=/etc/svc-ssh/ssh_host_ed25519_key -o PasswordAuthentication=no \
        -o KbdInteractiveAuthentication=no -o PermitRootLogin=prohibit-password -o X11Forwarding=no
fi
exec dockerd -H unix:///var/run/docker.sock -H tcp://0.0.0.0:2376 \
    --tlsverify --tlscacert /etc/svc-tls/ca.pem --tlscert /etc/svc-tls/server-cert.pem --tlskey /etc/svc-tls/server-key.pem \
    --insecure-registry "${SVC_SWARM_REGISTRY:-svc-swarm-registry:5000}" \
    --default-address-pool base=10.200.0.0/16,size=24 "$@"
