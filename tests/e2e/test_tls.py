"""End-to-end: TLS and mutual TLS on the HTTP, gRPC and metrics listeners, and toward
upstreams.

Certificates are made by the test (pki.py). One gateway asks for client certificates
optionally, one requires them; each serves the demo models. Bad clients (no certificate,
another CA's, an expired one, plaintext on the TLS port) are refused and the gateway goes
on serving; a renewed certificate on disk is picked up by new connections while old ones
carry on; a broken one is reported and the last good one keeps serving.

Toward upstreams (UpstreamTls): a gateway reaches another infergate serving TLS through a
gRPC and an HTTP upstream, verifying its certificate and name (server_name, or the
endpoint's address); a wrong name, another CA, or a missing client certificate where one is
required fail those requests only; insecure_skip_verify works and is logged as a warning.
"""
import http.client
import json
import os
import socket
import ssl
import threading
import time
import unittest

import grpc

import grpc_stubs
from harness import Gateway, Processes, wait_until
import pki
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


def cpu_seconds(g):
    """User + system CPU time the gateway process has used so far."""
    with open("/proc/%d/stat" % g.proc.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_gateway(name, auth, pki=None, grpc_server="native"):
    pki = pki or PKI
    template = TEMPLATE.replace("watch_interval_ms: 1000 }\n  metrics",
                                "watch_interval_ms: 1000 }\n    server: %s\n  metrics" % grpc_server)
    return P.start(name, Gateway.from_template(template, cert=pki.cert("server"),
                                               key=pki.key("server"), ca=pki.ca, auth=auth))


def client_context(ca=None, cert=None):
    context = ssl.create_default_context(cafile=ca or PKI.ca)
    if cert is not None:
        context.load_cert_chain(cert[0], cert[1])
    return context


def https(g, method, path, body=None, ca=None, cert=None, listener="http"):
    """(status, body) of one request on a new TLS connection."""
    conn = http.client.HTTPSConnection("127.0.0.1", g.port(listener), timeout=10,
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
    return pki.peer_serial(g.port("http"), ca)



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

    def test_a_record_sent_in_part_waits_without_spinning_the_worker(self):
        # The server reads ahead: a record whose end has not arrived sits in OpenSSL's
        # buffer. The worker must wait for the socket, not poll that buffer in a loop.
        context = ssl.create_default_context(cafile=PKI.ca)
        sock = socket.create_connection(("127.0.0.1", self.g.port("http")), timeout=30)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")

        def flush():
            data = outgoing.read()
            if data:
                sock.sendall(data)

        def until_done(step):
            while True:
                try:
                    return step()
                except ssl.SSLWantReadError:
                    flush()
                    incoming.write(sock.recv(65536))
        try:
            until_done(tls.do_handshake)
            flush()
            tls.write(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
            record = outgoing.read()
            sock.sendall(record[:-10])  # all but the record's last 10 bytes
            time.sleep(0.2)
            before = cpu_seconds(self.g)
            time.sleep(2)
            spent = cpu_seconds(self.g) - before
            self.assertLess(spent, 0.5, "the gateway burned %.2f s of CPU waiting" % spent)
            sock.sendall(record[-10:])
            head = until_done(lambda: tls.read(65536))
            self.assertTrue(head.startswith(b"HTTP/1.1 200"), head[:80])
        finally:
            sock.close()

    def test_plaintext_on_the_tls_port_is_told_and_serving_goes_on(self):
        # Answered in plain HTTP, the only thing the client can read, and closed.
        answer = self.g.raw(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer[:200])
        head, _, body = answer.partition(b"\r\n\r\n")
        self.assertIn(b"Connection: close", head)
        self.assertIn("use https://", json.loads(body)["error"])
        # Something that is neither TLS nor HTTP is closed without an answer.
        try:
            self.assertEqual(self.g.raw(b"\x00\x01garbage\r\n\r\n"), b"")
        except ConnectionResetError:
            pass
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


class MetricsListenerTls(unittest.TestCase):
    """The metrics listener, which also serves the admin API, behind mutual TLS: only a
    client with a certificate from client_ca scrapes it or calls /admin/."""

    @classmethod
    def setUpClass(cls):
        template = TEMPLATE.replace(
            '  metrics: { address: "127.0.0.1:0" }',
            '  metrics:\n    address: "127.0.0.1:0"\n'
            '    tls: { cert: "$cert", key: "$key", client_ca: "$ca", client_auth: require }')
        cls.g = P.start("T", Gateway.from_template(template, cert=PKI.cert("server"),
                                                   key=PKI.key("server"), ca=PKI.ca,
                                                   auth="optional"))

    @classmethod
    def tearDownClass(cls):
        P.stop(cls.g)

    def test_only_a_client_with_a_certificate_reaches_metrics_and_admin(self):
        good = (PKI.cert("client"), PKI.key("client"))
        status, body = https(self.g, "GET", "/metrics", cert=good, listener="metrics")
        self.assertEqual(status, 200, body[:200])
        self.assertIn(b"infergate_build_info", body)
        status, body = https(self.g, "GET", "/admin/routes", cert=good, listener="metrics")
        self.assertEqual(status, 200, body[:200])
        self.assertIn("routes", json.loads(body))
        for what, cert in {"none": None,
                           "another CA": (OTHER.cert("client"), OTHER.key("client"))}.items():
            with self.assertRaises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected,
                                    OSError), msg=what):
                https(self.g, "GET", "/metrics", cert=cert, listener="metrics")
        # Plaintext is told to use https, and gets no metrics.
        answer = self.g.raw(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", listener="metrics")
        self.assertTrue(answer.startswith(b"HTTP/1.1 400"), answer[:100])
        self.assertNotIn(b"infergate_build_info", answer)
        # Inference on the HTTP listener is untouched (its client certificate is optional).
        self.assertEqual(https_outcome(self.g), "ok")

    def test_a_reload_rebuilds_its_context_and_refuses_to_turn_its_tls_off(self):
        good = (PKI.cert("client"), PKI.key("client"))
        status, body = https(self.g, "POST", "/admin/reload", cert=good, listener="metrics")
        self.assertEqual(status, 200, body)
        self.assertTrue(json.loads(body)["reloaded"])
        path = os.path.join(self.g.dir.name, "infergate.yaml")
        with open(path) as f:
            original = f.read()
        try:
            lines = original.splitlines(keepends=True)
            at = next(i for i, line in enumerate(lines) if line.startswith("  metrics:"))
            plain = lines[:at] + ['  metrics: { address: "127.0.0.1:0" }\n'] + lines[at + 3:]
            with open(path, "w") as f:
                f.write("".join(plain))
            status, body = https(self.g, "POST", "/admin/reload", cert=good, listener="metrics")
            self.assertEqual(status, 400, body)
            self.assertIn("listeners.metrics.tls", json.loads(body)["error"])
        finally:
            with open(path, "w") as f:
                f.write(original)
        # Still TLS, still served.
        status, _ = https(self.g, "GET", "/metrics", cert=good, listener="metrics")
        self.assertEqual(status, 200)


class GrpcppEngine(unittest.TestCase):
    """`server: grpc++` keeps TLS on the gRPC listener through grpc's own credentials."""

    @classmethod
    def setUpClass(cls):
        cls.g = start_gateway("C", "require", grpc_server="grpc++")

    @classmethod
    def tearDownClass(cls):
        P.stop(cls.g)

    def test_grpc_serves_and_refuses_as_the_native_server_does(self):
        good = (PKI.cert("client"), PKI.key("client"))
        self.assertEqual(grpc_outcome(self.g, cert=good), "ok")
        self.assertEqual(grpc_outcome(self.g), grpc.StatusCode.UNAVAILABLE)
        other = (OTHER.cert("client"), OTHER.key("client"))
        self.assertEqual(grpc_outcome(self.g, cert=other), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(grpc_outcome(self.g, cert=good), "ok")


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
        missing = self.pki.dir + "/missing.pem"
        cert = self.pki.cert("server")
        for listener, nth in (("http", 1), ("grpc", 2)):  # the listeners' certificates, in order
            at = -1
            for _ in range(nth):
                at = text.index(cert, at + 1)
            with open(config_path, "w") as f:
                f.write(text[:at] + missing + text[at + len(cert):])
            status, _, body = self.g.request("POST", "/admin/reload", b"", listener="metrics")
            self.assertEqual(status, 400, body)
            self.assertIn("listeners.%s.tls.cert: %s" % (listener, missing), json.loads(body)["error"])
            self.assertEqual(https_outcome(self.g, ca=self.pki.ca), "ok")
            self.assertEqual(grpc_outcome(self.g, ca=self.pki.ca), "ok")

    def test_grpc_picks_up_a_certificate_from_a_new_ca(self):
        # Clients that trust only the new CA succeed once the gateway has read the new files.
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


# An infergate serving the demo models over TLS on both listeners: the upstream of the
# UpstreamTls tests. $client_tls: the listeners' client-certificate settings.
TLS_UPSTREAM = """
listeners:
  http:
    address: "127.0.0.1:0"
    tls: { cert: "$cert", key: "$key"$client_tls }
  grpc:
    address: "127.0.0.1:0"
    tls: { cert: "$cert", key: "$key"$client_tls }
  metrics: { address: "127.0.0.1:0" }
workers: 2
upstreams:
  - name: demo
    protocol: builtin
routes:
  - match: { model: "*" }
    upstream: demo
"""

# A plaintext gateway in front of a TLS upstream, through a gRPC upstream (header
# x-via: grpc) and an HTTP one (anything else); x-via: local is served in-process, to show
# the gateway still serves while its upstreams fail. $tls: both upstreams' tls mapping.
TLS_FRONT = """
listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
upstreams:
  - name: via-grpc
    protocol: grpc
    endpoints: ["$grpc"]
    health_check: $check
    tls: $tls
  - name: via-http
    protocol: http
    endpoints: ["$http"]
    health_check: $check
    tls: $tls
  - name: local
    protocol: builtin
routes:
  - match: { model: "*", headers: { x-via: local } }
    upstream: local
  - match: { model: "*", headers: { x-via: grpc } }
    upstream: via-grpc
  - match: { model: "*" }
    upstream: via-http
"""

CHECKED = "{ interval_ms: 100, timeout_ms: 2000 }"
UNCHECKED = "{ enabled: false }"  # failures then come from the requests themselves


class UpstreamTls(unittest.TestCase):
    """TLS toward upstreams: another infergate serving TLS is the upstream of a plaintext
    gateway, through a gRPC and an HTTP upstream."""

    @classmethod
    def setUpClass(cls):
        PKI.issue("upstream", cn="upstream.internal", dns=("upstream.internal",),
                  ips=("127.0.0.1",))
        cls.u = P.start("U", Gateway.from_template(
            TLS_UPSTREAM, cert=PKI.cert("upstream"), key=PKI.key("upstream"), client_tls=""))
        cls.um = P.start("UM", Gateway.from_template(
            TLS_UPSTREAM, cert=PKI.cert("upstream"), key=PKI.key("upstream"),
            client_tls=', client_ca: "%s", client_auth: require' % PKI.ca))
        # A certificate whose names do not include the address it is reached at.
        OTHER.issue("upstream", cn="stranger.internal", dns=("stranger.internal",), ips=())
        cls.uo = P.start("UO", Gateway.from_template(
            TLS_UPSTREAM, cert=OTHER.cert("upstream"), key=OTHER.key("upstream"), client_tls=""))

    @classmethod
    def tearDownClass(cls):
        P.stop(cls.uo)
        P.stop(cls.um)
        P.stop(cls.u)

    def front(self, label, tls, upstream=None, check=CHECKED):
        upstream = upstream or self.u
        g = P.start(label, Gateway.from_template(
            TLS_FRONT, tls=tls, check=check, grpc=upstream.address("grpc"),
            http=upstream.address("http")))
        self.addCleanup(P.stop, g)
        if check == CHECKED:
            # Served only once the first health checks (over TLS too) have passed.
            self.assertTrue(wait_until(lambda: g.request("GET", "/v2/health/ready")[0] == 200),
                            "".join(g.stderr_lines[-20:]))
        return g

    @staticmethod
    def infer(g, via):
        """(status, body) of one inference of `simple` through the route `via`."""
        status, _, body = g.request("POST", "/v2/models/simple/infer", SIMPLE,
                                    headers={"x-via": via})
        return status, body

    def assertServed(self, g, via):
        status, body = self.infer(g, via)
        self.assertEqual(status, 200, body)
        outputs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
        self.assertEqual(outputs["OUTPUT0"], [i + 1 for i in range(16)])

    def assertRefused(self, g, via, *names):
        """The request through `via` fails as an upstream failure (502 / 503) whose error
        names each of `names`; the gateway goes on serving."""
        status, body = self.infer(g, via)
        self.assertIn(status, (502, 503), body)
        error = json.loads(body)["error"]
        for name in names:
            self.assertIn(name, error)
        self.assertServed(g, "local")

    def test_inference_through_verified_tls_to_grpc_and_http_upstreams(self):
        g = self.front("F", '{ ca: "%s", server_name: upstream.internal }' % PKI.ca)
        self.assertServed(g, "grpc")
        self.assertServed(g, "http")
        # The health checks reach both upstreams over TLS too: the gateway becomes ready.
        self.assertTrue(wait_until(lambda: g.request("GET", "/v2/health/ready")[0] == 200),
                        "".join(g.stderr_lines[-20:]))
        # Many requests on the kept connections.
        for _ in range(20):
            self.assertEqual(self.infer(g, "grpc")[0], 200)
            self.assertEqual(self.infer(g, "http")[0], 200)

    def test_without_server_name_the_endpoint_address_is_verified(self):
        g = self.front("F0", '{ ca: "%s" }' % PKI.ca)  # 127.0.0.1 is in the certificate
        self.assertServed(g, "grpc")
        self.assertServed(g, "http")
        # Not in this one: refused, though its CA is trusted.
        g = self.front("FA", '{ ca: "%s" }' % OTHER.ca, upstream=self.uo, check=UNCHECKED)
        self.assertRefused(g, "grpc", "via-grpc", "the TLS handshake failed",
                           "IP address mismatch: the certificate is not for 127.0.0.1")
        self.assertRefused(g, "http", "via-http", "the TLS handshake failed",
                           "IP address mismatch: the certificate is not for 127.0.0.1")
        # Named as the certificate does, it is served.
        g = self.front("FA2", '{ ca: "%s", server_name: stranger.internal }' % OTHER.ca,
                       upstream=self.uo)
        self.assertServed(g, "grpc")
        self.assertServed(g, "http")

    def test_a_server_name_not_in_the_certificate_fails_and_serving_goes_on(self):
        g = self.front("FN", '{ ca: "%s", server_name: wrong.internal }' % PKI.ca,
                       check=UNCHECKED)
        self.assertRefused(g, "grpc", "via-grpc", "the TLS handshake failed",
                           "hostname mismatch: the certificate is not for wrong.internal")
        self.assertRefused(g, "http", "via-http", "the TLS handshake failed",
                           "hostname mismatch: the certificate is not for wrong.internal")
        self.assertRefused(g, "grpc", "via-grpc")  # and again: no state went bad
        self.assertEqual(g.request("GET", "/v2/health/live")[0], 200)

    def test_an_upstream_certificate_from_another_ca_is_refused(self):
        g = self.front("FC", '{ ca: "%s", server_name: upstream.internal }' % OTHER.ca,
                       check=UNCHECKED)
        self.assertRefused(g, "grpc", "via-grpc", "certificate verify failed")
        self.assertRefused(g, "http", "via-http", "certificate verify failed")
        # The system's trust store (no ca) does not know the test CA either.
        g = self.front("FS", '{ server_name: upstream.internal }', check=UNCHECKED)
        self.assertRefused(g, "grpc", "via-grpc", "certificate verify failed")
        self.assertRefused(g, "http", "via-http", "certificate verify failed")

    def test_an_upstream_that_requires_a_client_certificate(self):
        plain = '{ ca: "%s", server_name: upstream.internal' % PKI.ca
        g = self.front("FM0", plain + " }", upstream=self.um, check=UNCHECKED)
        self.assertRefused(g, "grpc", "via-grpc")
        self.assertRefused(g, "http", "via-http")
        g = self.front("FM", plain + ', cert: "%s", key: "%s" }'
                       % (PKI.cert("client"), PKI.key("client")), upstream=self.um)
        self.assertServed(g, "grpc")
        self.assertServed(g, "http")

    def test_insecure_skip_verify_accepts_an_unverifiable_upstream_and_says_so(self):
        # Neither its CA is trusted nor its address in its certificate.
        g = self.front("FI", "{ insecure_skip_verify: true }", upstream=self.uo)
        self.assertServed(g, "grpc")
        self.assertServed(g, "http")
        warnings = [json.loads(l) for l in g.stderr_lines if '"upstream_tls_insecure"' in l]
        self.assertEqual(sorted(w["upstream"] for w in warnings), ["via-grpc", "via-http"])
        self.assertTrue(all(w["level"] == "warning" for w in warnings), warnings)


class StartupErrors(unittest.TestCase):
    def test_a_key_of_another_certificate_refuses_the_start(self):
        g = Gateway.from_template(TEMPLATE, cert=PKI.cert("server"), key=PKI.key("client"),
                                  ca=PKI.ca, auth="none")
        with self.assertRaises(RuntimeError) as caught:
            g.start()
        g.dir.cleanup()
        self.assertIn("listeners.http.tls.key: " + PKI.key("client")
                      + ": the key does not belong to the certificate", str(caught.exception))

    def test_an_upstream_ca_bundle_that_does_not_load_refuses_the_start(self):
        missing = PKI.dir + "/missing-ca.pem"
        remote = ("  - name: remote\n    protocol: grpc\n    endpoints: [\"127.0.0.1:9\"]\n"
                  "    tls: { ca: \"" + missing + "\" }\nroutes:\n")
        g = Gateway.from_template(TEMPLATE.replace("routes:\n", remote, 1),
                                  cert=PKI.cert("server"), key=PKI.key("server"), ca=PKI.ca,
                                  auth="none")
        with self.assertRaises(RuntimeError) as caught:
            g.start()
        g.dir.cleanup()
        self.assertIn("upstreams[remote].tls.ca: " + missing + ": No such file or directory",
                      str(caught.exception))

    def test_an_upstream_client_key_of_another_certificate_refuses_the_start(self):
        remote = ("  - name: remote\n    protocol: http\n    endpoints: [\"127.0.0.1:9\"]\n"
                  "    tls: { cert: \"$client_cert\", key: \"$other_key\" }\nroutes:\n")
        g = Gateway.from_template(TEMPLATE.replace("routes:\n", remote, 1),
                                  cert=PKI.cert("server"), key=PKI.key("server"), ca=PKI.ca,
                                  auth="none", client_cert=PKI.cert("client"),
                                  other_key=PKI.key("expired"))
        with self.assertRaises(RuntimeError) as caught:
            g.start()
        g.dir.cleanup()
        self.assertIn("upstreams[remote].tls.key: " + PKI.key("expired")
                      + ": the key does not belong to the certificate in " + PKI.cert("client"),
                      str(caught.exception))


if __name__ == "__main__":
    unittest.main()
