"""A simulated ops host for the deploy tests: a throwaway CA, sshd and nginx on loopback.

Everything is generated per run in a temp dir (keys, certificates, configs) and every
server listens on 127.0.0.1 only. nginx runs the shipped deploy/proxy/nginx-hal.conf with
the host-specific parts (name, ports, certificate paths, release root) substituted.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests import ports

REPO = Path(__file__).resolve().parents[2]
NGINX_CONF = REPO / "deploy" / "proxy" / "nginx-hal.conf"


def free_port() -> int:
    return ports.free_port()  # tests/ports.py: outside the ephemeral range


def wait_port(port: int, proc: subprocess.Popen | None = None, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# --- a local CA -------------------------------------------------------------------------


@dataclass
class LocalCA:
    """A CA certificate (ca.pem) and a server certificate for `name` signed by it."""

    ca_pem: Path
    cert_pem: Path
    key_pem: Path


def make_ca(directory: Path, name: str = "localhost", *also: str) -> LocalCA:
    """A CA and a server certificate for `name` (and the names in `also`)."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "HAL test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in (name, *also)]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    result = LocalCA(directory / "ca.pem", directory / "fullchain.pem", directory / "privkey.pem")
    result.ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    result.cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    result.key_pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    result.key_pem.chmod(0o600)
    return result


# --- nginx ------------------------------------------------------------------------------


def nginx_site(
    *, name: str, tls_port: int, http_port: int, upstreams: list[int], root: Path, ca: LocalCA
) -> str:
    """The shipped nginx-hal.conf with this host's name, ports, certificate and root."""
    conf = NGINX_CONF.read_text()
    conf = re.sub(r"\n\s*listen \[::\]:[^\n]*", "", conf)
    conf = conf.replace("listen 80;", f"listen 127.0.0.1:{http_port};")
    conf = re.sub(r"listen 443 ssl", f"listen 127.0.0.1:{tls_port} ssl", conf)
    conf = conf.replace("/etc/letsencrypt/live/hal.example.org/fullchain.pem", str(ca.cert_pem))
    conf = conf.replace("/etc/letsencrypt/live/hal.example.org/privkey.pem", str(ca.key_pem))
    conf = conf.replace("/srv/hal/current", str(root / "current"))
    conf = conf.replace("hal.example.org", name)
    # One line per process, with the shipped line's parameters (max_fails=0 …).
    shipped = re.search(r"\n\s*server 127\.0\.0\.1:8000( [^;]*)?;", conf)
    assert shipped, "the upstream's server line changed shape"
    params = shipped.group(1) or ""
    servers = "".join(f"    server 127.0.0.1:{port}{params};\n" for port in upstreams)
    conf, count = re.subn(
        r"(upstream hal_daphne \{\n)(?:\s*server [^\n]*\n)+", r"\1" + servers, conf
    )
    assert count == 1, "the upstream block changed shape"
    return conf


def start_nginx(directory: Path, site: str) -> subprocess.Popen:
    """nginx in the foreground with a private prefix; the caller stops it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "logs").mkdir(exist_ok=True)
    (directory / "site.conf").write_text(site)
    mime = "/etc/nginx/mime.types"
    (directory / "nginx.conf").write_text(
        f"""user root;
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
    include {mime};
    log_format hal '$request_uri $status $upstream_addr';
    access_log {directory}/logs/access.log hal;
    client_body_temp_path {directory}/body;
    proxy_temp_path {directory}/proxy;
    fastcgi_temp_path {directory}/fastcgi;
    uwsgi_temp_path {directory}/uwsgi;
    scgi_temp_path {directory}/scgi;
    include {directory}/site.conf;
}}
"""
    )
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    test = subprocess.run(
        [nginx, "-t", "-p", str(directory), "-c", str(directory / "nginx.conf")],
        capture_output=True,
        text=True,
    )
    assert test.returncode == 0, test.stderr
    return subprocess.Popen(
        [nginx, "-p", str(directory), "-c", str(directory / "nginx.conf"), "-g", "daemon off;"],
        start_new_session=True,
    )


def reload_nginx(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGHUP)


# --- sshd -------------------------------------------------------------------------------


@dataclass
class SshHost:
    """A running sshd and an ssh_config that reaches it as `alias`, host key checked."""

    proc: subprocess.Popen
    port: int
    config: Path
    alias: str
    known_hosts: Path


def keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hal-test", "-f", str(path)],
        check=True,
    )
    return Path(f"{path}.pub").read_text().strip()


def start_sshd(directory: Path, alias: str = "ops") -> SshHost:
    """sshd on a loopback port: a fresh host key, root login with a fresh key only."""
    directory.mkdir(parents=True, exist_ok=True)
    host_key = directory / "ssh_host_ed25519_key"
    host_pub = keygen(host_key)
    user_key = directory / "id_ed25519"
    user_pub = keygen(user_key)
    (directory / "authorized_keys").write_text(user_pub + "\n")
    port = free_port()
    # sshd needs its privilege separation directory.
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    (directory / "sshd_config").write_text(
        f"""Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {directory}/sshd.pid
AuthorizedKeysFile {directory}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowUsers root
"""
    )
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    proc = subprocess.Popen(
        [sshd, "-D", "-e", "-f", str(directory / "sshd_config")],
        stderr=open(directory / "sshd.log", "ab"),
        start_new_session=True,
    )
    wait_port(port, proc)
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub}\n")
    config = directory / "ssh_config"
    config.write_text(
        f"""Host {alias}
    HostName 127.0.0.1
    Port {port}
    User root
    IdentityFile {user_key}
    IdentitiesOnly yes
    UserKnownHostsFile {known_hosts}
    GlobalKnownHostsFile /dev/null
"""
    )
    return SshHost(proc, port, config, alias, known_hosts)


# --- a minimal WebSocket client (RFC 6455 text frames; enough for ping/pong) -------------


class WsClosed(Exception):
    """The server closed the socket (close frame or end of stream)."""


def is_pong(text: str | None) -> bool:
    """Whether a text frame is the consumer's answer to a ping (read as JSON: its spelling
    — spaces, escapes — is the server's to choose)."""
    try:
        return text is not None and json.loads(text) == {"type": "pong"}
    except ValueError:
        return False


class WsClient:
    """A TLS WebSocket connection with a session cookie, through the proxy."""

    def __init__(self, port: int, path: str, *, cookie: str, cafile: Path, host: str) -> None:
        context = ssl.create_default_context(cafile=str(cafile))
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock = context.wrap_socket(raw, server_hostname=host)
        key = base64.b64encode(secrets.token_bytes(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\nOrigin: https://{host}:{port}\r\n"
                f"Cookie: {cookie}\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise WsClosed("closed during the handshake")
            head += chunk
        head, self.buffer = head.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ", 2)[1])
        if self.status != 101:
            self.sock.close()
            raise WsClosed(f"handshake answered {self.status}")

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise WsClosed("end of stream")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def send_text(self, text: str) -> None:
        payload = text.encode()
        mask = secrets.token_bytes(4)
        header = bytes([0x81])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        else:
            header += bytes([0x80 | 126]) + struct.pack("!H", len(payload))
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def recv_text(self, timeout: float) -> str | None:
        """The next text message, None on timeout; WsClosed when the server closed."""
        self.sock.settimeout(timeout)
        try:
            first, second = self._read(2)
        except TimeoutError:
            return None
        except (OSError, ssl.SSLError) as exc:
            raise WsClosed(str(exc)) from exc
        self.sock.settimeout(30)
        length = second & 0x7F
        if length == 126:
            length = struct.unpack("!H", self._read(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", self._read(8))[0]
        payload = self._read(length)
        opcode = first & 0x0F
        if opcode == 0x8:
            raise WsClosed("close frame")
        if opcode == 0x9:  # ping: answer it
            self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + b"\0\0\0\0" + payload)
            return self.recv_text(timeout)
        return payload.decode()

    def close(self) -> None:
        try:
            self.sock.sendall(bytes([0x88, 0x80]) + secrets.token_bytes(4))
            self.sock.settimeout(5)
            while self.sock.recv(4096):
                pass
        except (OSError, ssl.SSLError):
            pass
        self.sock.close()
