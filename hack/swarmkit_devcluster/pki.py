"""Certificates and keys for the local control plane (generated with ``cryptography``)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVING_DNS = [
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "process-node",
]
SERVING_IPS = ["127.0.0.1", "::1", "10.0.0.1"]


@dataclass(frozen=True)
class Pki:
    dir: Path

    @property
    def ca_crt(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def serving_crt(self) -> Path:
        return self.dir / "serving.crt"

    @property
    def serving_key(self) -> Path:
        return self.dir / "serving.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    @property
    def tokens_csv(self) -> Path:
        return self.dir / "tokens.csv"


def _write(path: Path, data: bytes, mode: int = 0o600) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def generate(pki_dir: Path) -> Pki:
    """A CA, a serving cert for 127.0.0.1/localhost/kubernetes.default..., SA signing keys."""
    pki = Pki(pki_dir)
    pki_dir.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    not_after = now + dt.timedelta(days=365)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "swarmkit-devcluster-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    srv_key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in SERVING_DNS]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in SERVING_IPS]
    srv_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(srv_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    _write(pki.ca_key, _key_pem(ca_key))
    _write(pki.ca_crt, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(pki.serving_key, _key_pem(srv_key))
    _write(pki.serving_crt, srv_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(pki.sa_key, _key_pem(sa_key))
    _write(
        pki.sa_pub,
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
        0o644,
    )
    return pki


@dataclass(frozen=True)
class Identity:
    user: str
    token: str
    groups: tuple[str, ...] = ()


def make_identities(node_name: str) -> dict[str, Identity]:
    """Static-token identities: the admin, the controller-manager, the scheduler, the node."""

    def tok() -> str:
        return secrets.token_hex(24)

    return {
        "admin": Identity("swarmkit-admin", tok(), ("system:masters",)),
        "controller-manager": Identity("system:kube-controller-manager", tok()),
        "scheduler": Identity("system:kube-scheduler", tok()),
        "node": Identity(f"system:node:{node_name}", tok(), ("system:nodes",)),
    }


def write_token_file(path: Path, identities: dict[str, Identity]) -> None:
    lines = []
    for i, ident in enumerate(identities.values()):
        groups = ",".join(ident.groups)
        line = f"{ident.token},{ident.user},uid-{i}"
        if groups:
            line += f',"{groups}"'
        lines.append(line)
    _write(path, ("\n".join(lines) + "\n").encode())


def issue_leaf(
    pki: Pki,
    name: str,
    common_name: str,
    *,
    orgs: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    server: bool = False,
) -> tuple[Path, Path]:
    """A certificate signed by the cluster CA for one node component (the real node's kubelet
    serving and client certificates, kube-proxy, kube-router, the apiserver's kubelet client);
    written as ``<name>.crt``/``<name>.key`` beside the CA. Returns (cert, key)."""
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(pki.ca_crt.read_bytes())
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key} is not the EC key generate() writes")
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    usage = [ExtendedKeyUsageOID.SERVER_AUTH] if server else [ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
    )
    if ips:
        sans = [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    crt_path, key_path = pki.dir / f"{name}.crt", pki.dir / f"{name}.key"
    _write(key_path, _key_pem(key))
    _write(crt_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return crt_path, key_path
