"""The local swarm's certificates, made with openssl and cached: a CA, one server certificate the
node engines serve (--tlsverify: they accept only clients the CA signed) and one client certificate
for svcd and the tests.

    <dir>/client/{ca,cert,key}.pem          SERVICE_SWARM_CERT_PATH (as DOCKER_CERT_PATH)
    <dir>/server/{ca,server-cert,server-key}.pem    copied into each node as /etc/svc-tls
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

DAYS = "825"


def _openssl(*args: str, cwd: Path) -> None:
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"[swarm] openssl {args[0]} failed: {p.stderr.strip()[-400:]}")


def _key(path: Path) -> None:
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(path), cwd=path.parent)
    path.chmod(0o600)


def _signed(work: Path, name: str, subject: str, extensions: str) -> None:
    """work/<name>-key.pem and work/<name>-cert.pem, signed by work/ca.pem."""
    _key(work / f"{name}-key.pem")
    _openssl("req", "-new", "-key", f"{name}-key.pem", "-subj", subject, "-out", f"{name}.csr", cwd=work)
    (work / f"{name}.ext").write_text(extensions)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
             "-days", DAYS, "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}-cert.pem", cwd=work)


def ensure(directory: Path, addresses: list[str], names: list[str]) -> str:
    """Certificates for engines at `addresses` / `names`, made once and kept while they still name the
    same hosts; returns a short fingerprint of the server certificate (a node started with another
    one is replaced)."""
    sans = ",".join([*(f"IP:{a}" for a in addresses), "IP:127.0.0.1", *(f"DNS:{n}" for n in names), "DNS:localhost"])
    record = directory / "sans.txt"
    server, client = directory / "server", directory / "client"
    done = all((server / f).is_file() for f in ("ca.pem", "server-cert.pem", "server-key.pem")) and \
        all((client / f).is_file() for f in ("ca.pem", "cert.pem", "key.pem"))
    if not (done and record.is_file() and record.read_text() == sans):
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            work = Path(tmp)
            _key(work / "ca-key.pem")
            _openssl("req", "-new", "-x509", "-key", "ca-key.pem", "-subj", "/CN=svc local swarm CA", "-days", DAYS,
                     "-sha256", "-out", "ca.pem", cwd=work)
            _signed(work, "server", "/CN=svc-swarm-node",
                    f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n")
            _signed(work, "client", "/CN=svcd", "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature\n")
            for target, files in ((server, {"ca.pem": "ca.pem", "server-cert.pem": "server-cert.pem",
                                             "server-key.pem": "server-key.pem"}),
                                  (client, {"ca.pem": "ca.pem", "cert.pem": "client-cert.pem", "key.pem": "client-key.pem"})):
                shutil.rmtree(target, ignore_errors=True)
                target.mkdir(mode=0o700)
                for dest, src in files.items():
                    shutil.copy2(work / src, target / dest)
        record.write_text(sans)
    return hashlib.sha256((server / "server-cert.pem").read_bytes()).hexdigest()[:12]


def docker_flags(directory: Path) -> list[str]:
    """`docker` CLI flags that reach a node engine with the client certificate."""
    client = directory / "client"
    return ["--tlsverify", "--tlscacert", str(client / "ca.pem"), "--tlscert", str(client / "cert.pem"),
            "--tlskey", str(client / "key.pem")]
