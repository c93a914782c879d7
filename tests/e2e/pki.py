"""Certificates for the TLS tests, made when the tests run (no key is ever committed):
a CA and the leaf certificates it signs, as PEM files in a temporary directory.
Debian's python3-cryptography builds them."""
import datetime
import ipaddress
import os
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAY = datetime.timedelta(days=1)


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "infergate tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(path, key):
    with open(path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))


class Pki:
    """A CA in its own directory; issue() writes <name>.pem (leaf then CA) and <name>.key."""

    def __init__(self, ca_name="infergate test CA"):
        self._dir = tempfile.TemporaryDirectory(prefix="infergate-pki-")
        self.dir = self._dir.name
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.utcnow()
        self.ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name(ca_name)).issuer_name(_name(ca_name))
            .public_key(self.ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - DAY).not_valid_after(now + 30 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                         False), critical=True)
            .sign(self.ca_key, hashes.SHA256()))
        with open(self.ca, "wb") as f:
            f.write(self.ca_cert.public_bytes(serialization.Encoding.PEM))

    @property
    def ca(self):
        return os.path.join(self.dir, "ca.pem")

    def cert(self, name):
        return os.path.join(self.dir, name + ".pem")

    def key(self, name):
        return os.path.join(self.dir, name + ".key")

    def issue(self, name, cn="localhost", dns=("localhost",), ips=("127.0.0.1", "::1"),
              uris=(), client=False, valid_from=-DAY, valid_to=DAY):
        """Signs a new leaf for `name` (replacing the files when they exist: write to a
        temporary name and rename, as Kubernetes updates a mounted secret)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.utcnow()
        sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i))
                                                 for i in ips]
        sans += [x509.UniformResourceIdentifier(u) for u in uris]
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn)).issuer_name(self.ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now + valid_from).not_valid_after(now + valid_to)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.ca_key, hashes.SHA256())
        chain = (cert.public_bytes(serialization.Encoding.PEM)
                 + self.ca_cert.public_bytes(serialization.Encoding.PEM))
        _write_key(self.key(name) + ".new", key)
        with open(self.cert(name) + ".new", "wb") as f:
            f.write(chain)
        os.replace(self.key(name) + ".new", self.key(name))
        os.replace(self.cert(name) + ".new", self.cert(name))
        return cert

    def cleanup(self):
        self._dir.cleanup()


def peer_serial(port, ca, host="127.0.0.1"):
    """The serial number of the certificate a new HTTPS connection to `port` is shown,
    verified against the CA bundle `ca`."""
    import http.client
    import ssl
    conn = http.client.HTTPSConnection(host, port, timeout=10,
                                       context=ssl.create_default_context(cafile=ca))
    try:
        conn.connect()
        der = conn.sock.getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number
    finally:
        conn.close()
