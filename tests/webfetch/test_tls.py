"""Pinned connections still verify TLS against the URL's host name (SNI + certificate)."""

from __future__ import annotations

import datetime as dt
import ssl

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.webfetch.conftest import LoopbackServer, send
from webfetch.pipeline import fetch_many


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_pki(tmp_path, dns_name: str):
    """A throwaway CA and a leaf certificate for `dns_name`, generated per test run."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("HAL test CA"))
        .issuer_name(_name("HAL test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
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
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(dns_name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_file = tmp_path / f"{dns_name}.pem"
    key_file = tmp_path / f"{dns_name}.key"
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert_file, key_file)
    client_ctx = ssl.create_default_context(
        cadata=ca.public_bytes(serialization.Encoding.PEM).decode()
    )
    return server_ctx, client_ctx


@pytest.fixture
async def tls_server(tmp_path):
    server_ctx, client_ctx = make_pki(tmp_path, "secure.test")
    srv = LoopbackServer()
    await srv.start(ssl_context=server_ctx)
    srv.client_ctx = client_ctx

    async def page(req, writer):
        await send(
            writer,
            200,
            b"<html><head><title>Secure</title></head><body>"
            b"<p>tls ok tls ok tls ok</p></body></html>",
        )

    srv.routes["/"] = page
    try:
        yield srv
    finally:
        await srv.stop()


async def test_tls_verifies_the_original_host_on_the_pinned_address(
    allow_loopback, resolver, tls_server
):
    resolver.table["secure.test"] = ["127.0.0.1"]
    (r,) = await fetch_many(
        [f"https://secure.test:{tls_server.port}/"], robots=False, ssl_context=tls_server.client_ctx
    )
    assert r.ok, r.detail
    assert r.title == "Secure"
    assert resolver.calls == ["secure.test"]


async def test_certificate_for_another_name_is_rejected(allow_loopback, resolver, tls_server):
    resolver.table["evil.test"] = ["127.0.0.1"]  # same address, wrong name for the cert
    (r,) = await fetch_many(
        [f"https://evil.test:{tls_server.port}/"], robots=False, ssl_context=tls_server.client_ctx
    )
    assert (r.ok, r.failure_reason) == (False, "network")
    assert tls_server.requests == []


async def test_https_to_http_redirect_is_refused(allow_loopback, resolver, tls_server, server):
    resolver.table["secure.test"] = ["127.0.0.1"]

    async def down(req, writer):
        await send(writer, 302, b"", None, {"Location": server.url("/plain")})

    tls_server.routes["/down"] = down
    (r,) = await fetch_many(
        [f"https://secure.test:{tls_server.port}/down"],
        robots=False,
        ssl_context=tls_server.client_ctx,
    )
    assert (r.ok, r.failure_reason) == (False, "blocked_address")
    assert "downgrade" in r.detail
    assert server.requests == []
