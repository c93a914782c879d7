"""End-to-end: TLS and mutual TLS on the HTTP and gRPC listeners.

Certificates are made by the test (pki.py). One gateway asks for client certificates
optionally, one requires them; each serves the demo models. Bad clients (no certificate,
another CA's, an expired one, plaintext on the TLS port) are refused and the gateway goes
on serving; a renewed certificate on disk is picked up by new connections while old ones
carry on; a broken one is reported and the last good one keeps serving.
"""
import http.client
import json
import os
import ssl
import threading
import time
import unittest

import grpc
from cryptography import x509

import grpc_stubs
from harness import Gateway, Processes, wait_until
from pki import DAY, Pki

TEMPLATE = """
listeners:
  http:
    address: "127.0.0.1:0"
    tls: { cert: "$cert", key: "$key", client_ca: "$ca", client_auth: $auth, watch_interval_ms: 1000 }
  grpc:
    address: "127.0.0.1:0"
    tls: { cert: "$cert", key: "$key", client_ca: "$ca", client_auth: $auth, watch_interval_ms: 1000 }
  metrics: { address: "127.0.0.1:0" }
workers: 2
lifecycle: { watch_interval_ms: 200 }
upstreams:
  - name: demo
    protocol: builtin
routes:
  - match: { model: "*" }
    upstream: demo
"""

SIMPLE = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]})

P = None
PKI = OTHER = None


def setUpModule():
    global P, PKI, OTHER
    P = Processes()
    PKI = Pki()
    OTHER = Pki("another CA")
    PKI.issue("server")
    PKI.issue("client", cn="model-client", dns=(), ips=(), client=True)
    PKI.issue("expired", cn="old-client", dns=(), ips=(), client=True,
              valid_from=-3 * DAY, valid_to=-DAY)
    OTHER.issue("client", cn="stranger", dns=(), ips=(), client=True)


def tearDownModule():
    grpc_stubs.close_channels()
    problems = P.stop_all()
    PKI.cleanup()
    OTHER.cleanup()
    assert not problems, "\n".join(problems)


def start_gateway(name, auth, pki=None):
    pki = pki or PKI
    return P.start(name, Gateway.from_template(TEMPLATE, cert=pki.cert("server"),
                                               key=pki.key("server"), ca=pki.ca, auth=auth))


def client_context(ca=None, cert=None):
    context = ssl.create_default_context(cafile=ca or PKI.ca)
    if cert is not None:
        context.load_cert_chain(cert[0], cert[1])
    return context


def https(g, method, path, body=None, ca=None, cert=None):
    """(status, body) of one request on a new TLS connection."""
    conn = http.client.HTTPSConnection("127.0.0.1", g.port("http"), timeout=10,
                                       context=client_context(ca, cert))
    try:
        conn.request(method, path, body=body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def https_outcome(g, cert=None, ca=None):
    """"ok", or "refused" when the handshake or the first exchange failed."""
    try:
        status, _ = https(g, "GET", "/v2/health/ready", ca=ca, cert=cert)
        return "ok" if status == 200 else status
    except (ssl.SSLError, ConnectionError, http.client.RemoteDisconnected, OSError):
        return "refused"


def grpc_outcome(g, cert=None, ca=None):
    with open(ca or PKI.ca, "rb") as f:
        root = f.read()
    key = chain = None
    if cert is not None:
        with open(cert[1], "rb") as f:
            key = f.read()
        with open(cert[0], "rb") as f:
            chain = f.read()
    credentials = grpc.ssl_channel_credentials(root, key, chain)
    pb, service, _, _ = grpc_stubs.load()
    with grpc.secure_channel(g.address("grpc"), credentials) as channel:
        stub = service.GRPCInferenceServiceStub(channel)
        try:
            return "ok" if stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live else "not live"
        except grpc.RpcError as e:
            return e.code()


def peer_serial(g, ca):
    """The serial number of the certificate a new HTTPS connection is shown."""
    conn = http.client.HTTPSConnection("127.0.0.1", g.port("http"), timeout=10,
                                       context=client_context(ca))
    try:
        conn.connect()
        der = conn.sock.getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number
    finally:
        conn.close()



class OptionalClientCertificates(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.g = start_gateway("O", "optional")

    @classmethod
    def tearDownClass(cls):
        P.stop(cls.g)

    def test_https_serves_inference_with_or_without_a_client_certificate(self):
        status, body = https(self.g, "POST", "/v2/models/simple/infer", SIMPLE)
        self.assertEqual(status, 200, body)
        outputs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
        self.assertEqual(outputs["OUTPUT0"], [i + 1 for i in range(16)])
        status, _ = https(self.g, "GET", "/v2/health/ready",
                          cert=(PKI.cert("client"), PKI.key("client")))
        self.assertEqual(status, 200)

    def test_grpc_serves_over_tls(self):
        self.assertEqual(grpc_outcome(self.g), "ok")
        self.assertEqual(grpc_outcome(self.g, cert=(PKI.cert("client"), PKI.key("client"))), "ok")

    def test_a_certificate_from_another_ca_is_refused_even_when_optional(self):
        other = (OTHER.cert("client"), OTHER.key("client"))
        self.assertEqual(https_outcome(self.g, cert=other), "refused")
        self.assertEqual(grpc_outcome(self.g, cert=other), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(https_outcome(self.g), "ok")

    def test_plaintext_on_the_tls_port_is_dropped_and_serving_goes_on(self):
        try:  # closed at once (a reset for the unread bytes), never answered in plaintext
            answer = self.g.raw(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        except ConnectionResetError:
            answer = b""
        self.assertNotIn(b"HTTP/1.1", answer)
        with self.assertRaises(grpc.RpcError) as caught:
            channel = grpc.insecure_channel(self.g.address("grpc"))
            pb, service, _, _ = grpc_stubs.load()
            try:
                service.GRPCInferenceServiceStub(channel).ServerLive(pb.ServerLiveRequest(),
                                                                     timeout=5)
            finally:
                channel.close()
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(https_outcome(self.g), "ok")
        self.assertEqual(grpc_outcome(self.g), "ok")

    def test_a_client_that_does_not_trust_the_server_gets_nowhere(self):
        self.assertEqual(https_outcome(self.g, ca=OTHER.ca), "refused")
        self.assertEqual(grpc_outcome(self.g, ca=OTHER.ca), grpc.StatusCode.UNAVAILABLE)


class RequiredClientCertificates(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.g = start_gateway("M", "require")

    @classmethod
    def tearDownClass(cls):
        P.stop(cls.g)

    def test_each_bad_client_is_refused_on_both_listeners(self):
        good = (PKI.cert("client"), PKI.key("client"))
        cases = {"none": None, "another CA": (OTHER.cert("client"), OTHER.key("client")),
                 "expired": (PKI.cert("expired"), PKI.key("expired"))}
        for what, cert in cases.items():
            self.assertEqual(https_outcome(self.g, cert=cert), "refused", what)
            self.assertEqual(grpc_outcome(self.g, cert=cert), grpc.StatusCode.UNAVAILABLE, what)
        # And the gateway serves the good one after all of them.
        self.assertEqual(https_outcome(self.g, cert=good), "ok")
        self.assertEqual(grpc_outcome(self.g, cert=good), "ok")
        status, body = https(self.g, "POST", "/v2/models/simple/infer", SIMPLE, cert=good)
        self.assertEqual(status, 200, body)


class CertificateRenewal(unittest.TestCase):
    """Renewal on disk: new connections get the new certificate, old ones carry on, no
    request fails meanwhile; a broken file is reported and changes nothing."""

    def setUp(self):
        self.pki = Pki()
        self.pki.issue("server")
        self.g = start_gateway("R", "none", pki=self.pki)

    def tearDown(self):
        P.stop(self.g)
        self.pki.cleanup()

    def test_renewed_certificate_under_load(self):
        first = peer_serial(self.g, self.pki.ca)
        kept = http.client.HTTPSConnection("127.0.0.1", self.g.port("http"), timeout=10,
                                           context=client_context(self.pki.ca))
        kept.request("GET", "/v2/health/live")
        response = kept.getresponse()
        response.read()
        self.assertEqual(response.status, 200)
        failures, done = [], threading.Event()
        count = [0]

        def load():
            while not done.is_set():
                try:
                    status, _ = https(self.g, "POST", "/v2/models/simple/infer", SIMPLE,
                                      ca=self.pki.ca)
                    if status != 200:
                        failures.append(status)
                    count[0] += 1
                except Exception as e:  # noqa: BLE001 (any failure is the finding)
                    failures.append(repr(e))
        threads = [threading.Thread(target=load) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            renewed = self.pki.issue("server", cn="renewed")
            self.assertTrue(wait_until(lambda: peer_serial(self.g, self.pki.ca)
                                       == renewed.serial_number),
                            "the renewed certificate was never served")
            self.assertNotEqual(first, renewed.serial_number)
            time.sleep(0.3)
        finally:
            done.set()
            for t in threads:
                t.join()
        self.assertEqual(failures, [])
        self.assertGreater(count[0], 0)
        # The connection opened before the renewal still works.
        kept.request("GET", "/v2/health/live")
        self.assertEqual(kept.getresponse().status, 200)
        kept.close()

        # A broken file: reported once, and the renewed certificate keeps serving.
        with open(self.pki.cert("server"), "w") as f:
            f.write("not a certificate\n")
        self.assertTrue(wait_until(lambda: any('"event":"tls_reload"' in l and '"ok":false' in l
                                               for l in self.g.stderr_lines)),
                        "".join(self.g.stderr_lines[-20:]))
        self.assertEqual(peer_serial(self.g, self.pki.ca), renewed.serial_number)

    def test_a_reload_naming_a_missing_certificate_is_refused(self):
        config_path = os.path.join(self.g.dir.name, "infergate.yaml")
        with open(config_path) as f:
            text = f.read()
        with open(config_path, "w") as f:  # the HTTP listener's (the first) only
            f.write(text.replace(self.pki.cert("server"), self.pki.dir + "/missing.pem", 1))
        status, _, body = self.g.request("POST", "/admin/reload", b"", listener="metrics")
        self.assertEqual(status, 400, body)
        self.assertIn("listeners.http.tls.cert: " + self.pki.dir + "/missing.pem",
                      json.loads(body)["error"])
        self.assertEqual(https_outcome(self.g, ca=self.pki.ca), "ok")

    def test_grpc_picks_up_a_certificate_from_a_new_ca(self):
        # Clients that trust only the new CA succeed once grpc has read the new files.
        newer = Pki("renewal CA")
        try:
            with open(newer.ca) as f:
                new_ca = f.read()
            with open(self.pki.ca) as f:
                old_ca = f.read()
            newer.issue("server")
            with open(newer.cert("server"), "rb") as f:
                chain = f.read()
            with open(newer.key("server"), "rb") as f:
                key = f.read()
            self.assertEqual(grpc_outcome(self.g, ca=self.pki.ca), "ok")
            for path, data in ((self.pki.key("server"), key), (self.pki.cert("server"), chain)):
                with open(path + ".new", "wb") as f:
                    f.write(data)
                os.replace(path + ".new", path)
            self.assertNotEqual(new_ca, old_ca)
            self.assertTrue(wait_until(lambda: grpc_outcome(self.g, ca=newer.ca) == "ok"),
                            "grpc never served the new certificate")
            self.assertTrue(wait_until(lambda: https_outcome(self.g, ca=newer.ca) == "ok"))
        finally:
            newer.cleanup()


class StartupErrors(unittest.TestCase):
    def test_a_key_of_another_certificate_refuses_the_start(self):
        g = Gateway.from_template(TEMPLATE, cert=PKI.cert("server"), key=PKI.key("client"),
                                  ca=PKI.ca, auth="none")
        with self.assertRaises(RuntimeError) as caught:
            g.start()
        g.dir.cleanup()
        self.assertIn("listeners.http.tls.key: " + PKI.key("client")
                      + ": the key does not belong to the certificate", str(caught.exception))

    def test_tls_toward_an_upstream_is_refused_until_it_is_built(self):
        remote = ("  - name: remote\n    protocol: grpc\n    endpoints: [\"127.0.0.1:9\"]\n"
                  "    tls: { ca: \"$ca\" }\nroutes:\n")
        g = Gateway.from_template(TEMPLATE.replace("routes:\n", remote, 1),
                                  cert=PKI.cert("server"), key=PKI.key("server"), ca=PKI.ca,
                                  auth="none")
        with self.assertRaises(RuntimeError) as caught:
            g.start()
        g.dir.cleanup()
        self.assertIn("upstreams[remote].tls: TLS toward upstreams is not available",
                      str(caught.exception))


if __name__ == "__main__":
    unittest.main()
