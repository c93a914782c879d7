"""End-to-end: authentication, access rules per API group and route, rate limits.

One gateway knows three principals: `ci` (API keys from a file, hot reloaded), `web` (a
key from an environment variable, also accepted in the x-api-key header) and `ops` (a
client certificate on the TLS HTTP listener, and a key). JWTs signed by the test with
HS256, RS256 and ES256 name principals of their own. Each API group is tried with the
right, a wrong and no credential over HTTP and gRPC; the gateway keeps serving after each
refusal, and the access log names the principal but never a credential.
"""
import base64
import hashlib
import hmac
import http.client
import json
import os
import socket
import ssl
import tempfile
import time
import unittest

import grpc
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

import grpc_stubs
from harness import Gateway, Processes, wait_until
from pki import Pki

CI_KEY = "ci-key-0123456789abcdef"
CI_ROTATED = "ci-key-rotated-0123456789"
WEB_KEY = "web-key-0123456789abcdef"
OPS_KEY = "ops-key-0123456789abcdef"
HS_SECRET = b"s" * 40

TEMPLATE = """
listeners:
  http:
    address: "127.0.0.1:0"
    tls: { cert: "$cert", key: "$key", client_ca: "$ca", client_auth: optional }
  grpc: { address: "127.0.0.1:0", public: true }
  metrics: { address: "127.0.0.1:0" }
workers: 2
lifecycle: { watch_interval_ms: 200 }
observability:
  access_log: { enabled: true, format: json, path: "$access_log" }
auth:
  watch_interval_ms: 1000
  api_key_header: x-api-key
  principals:
    - { name: ci, api_keys_file: "$ci_keys" }
    - { name: web, api_key_env: INFERGATE_E2E_WEB_KEY }
    - { name: ops, api_keys_file: "$ops_keys", client_cert: { common_name: ops-console } }
  jwt: { keys_file: "$jwks", issuer: "https://issuer.test", audiences: [infergate] }
  api_groups:
    health: public
    inference: authenticated
    model-repository: [ops]
    statistics: { allow: [ci, ops], listeners: [grpc] }
    logging: deny
    admin: [ops]
upstreams:
  - name: demo
    protocol: builtin
routes:
  - name: secret
    match: { model: identity_int32 }
    upstream: demo
    auth: [ops, svc-es]
  - match: { model: "*" }
    upstream: demo
rate_limits:
  - { model: identity_int8, per: principal, requests_per_second: 0.2, burst: 2 }
"""

SIMPLE = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]})
LIMITED = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "INT8",
                                  "data": [1, 2]}]})
IDENTITY = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "INT32",
                                   "data": [7, 8]}]})

P = PKI = G = None
TMP = None
RSA_KEY = EC_KEY = None


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwks():
    rsa_pub = RSA_KEY.public_key().public_numbers()
    ec_pub = EC_KEY.public_key().public_numbers()
    as_bytes = lambda n, size: n.to_bytes(size, "big")
    return json.dumps({"keys": [
        {"kty": "RSA", "kid": "r1", "n": b64url(as_bytes(rsa_pub.n, 256)),
         "e": b64url(as_bytes(rsa_pub.e, 3))},
        {"kty": "EC", "kid": "e1", "crv": "P-256", "x": b64url(as_bytes(ec_pub.x, 32)),
         "y": b64url(as_bytes(ec_pub.y, 32))},
        {"kty": "oct", "kid": "h1", "k": b64url(HS_SECRET)}]})


def token(alg, sub, exp_in=600, aud="infergate", iss="https://issuer.test"):
    header = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    claims = b64url(json.dumps({"sub": sub, "aud": aud, "iss": iss,
                                "exp": int(time.time()) + exp_in}).encode())
    signed = f"{header}.{claims}".encode()
    if alg == "HS256":
        sig = hmac.new(HS_SECRET, signed, hashlib.sha256).digest()
    elif alg == "RS256":
        sig = RSA_KEY.sign(signed, padding.PKCS1v15(), hashes.SHA256())
    else:
        r, s = decode_dss_signature(EC_KEY.sign(signed, ec.ECDSA(hashes.SHA256())))
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{header}.{claims}.{b64url(sig)}"


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def setUpModule():
    global P, PKI, G, TMP, RSA_KEY, EC_KEY
    P = Processes()
    PKI = Pki()
    PKI.issue("server")
    PKI.issue("ops", cn="ops-console", dns=(), ips=(), client=True)
    PKI.issue("other", cn="someone-else", dns=(), ips=(), client=True)
    TMP = tempfile.TemporaryDirectory(prefix="infergate-auth-")
    RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    EC_KEY = ec.generate_private_key(ec.SECP256R1())
    paths = {name: os.path.join(TMP.name, name) for name in ("ci_keys", "ops_keys", "jwks")}
    write(paths["ci_keys"], f"# the CI runners\n{CI_KEY}\n")
    write(paths["ops_keys"], OPS_KEY + "\n")
    write(paths["jwks"], jwks())
    os.environ["INFERGATE_E2E_WEB_KEY"] = WEB_KEY
    G = P.start("A", Gateway.from_template(
        TEMPLATE, cert=PKI.cert("server"), key=PKI.key("server"), ca=PKI.ca,
        access_log=os.path.join(TMP.name, "access.log"), **paths))


def tearDownModule():
    grpc_stubs.close_channels()
    problems = P.stop_all()
    PKI.cleanup()
    TMP.cleanup()
    assert not problems, "\n".join(problems)


def https(method, path, body=None, headers=None, cert=None):
    """(status, headers, body) of one request on a new TLS connection."""
    context = ssl.create_default_context(cafile=PKI.ca)
    if cert:
        context.load_cert_chain(PKI.cert(cert), PKI.key(cert))
    conn = http.client.HTTPSConnection("127.0.0.1", G.port("http"), timeout=10, context=context)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        headers = {}
        for k, v in resp.getheaders():  # a repeated header reads "a, b", as HTTP folds it
            headers[k.lower()] = headers[k.lower()] + ", " + v if k.lower() in headers else v
        return resp.status, headers, resp.read()
    finally:
        conn.close()


def bearer(key):
    return {"Authorization": f"Bearer {key}"}


def grpc_call(method, request, metadata=()):
    """("ok", response) or (code, details)."""
    stub = grpc_stubs.stub_of(G)
    return grpc_stubs.grpc_outcome(lambda: getattr(stub, method)(request, metadata=metadata,
                                                                 timeout=10))


def grpc_auth(key):
    return (("authorization", f"Bearer {key}"),)


class ApiGroups(unittest.TestCase):
    def assertServing(self):
        status, _, _ = https("GET", "/v2/health/ready")
        self.assertEqual(status, 200)

    def test_inference_needs_any_principal(self):
        status, headers, body = https("POST", "/v2/models/simple/infer", SIMPLE)
        self.assertEqual(status, 401, body)
        self.assertEqual(headers.get("www-authenticate"), 'Bearer realm="infergate"')
        self.assertIn("credentials are required for API group 'inference'", json.loads(body)["error"])
        for headers in (bearer(CI_KEY), bearer(WEB_KEY), {"x-api-key": WEB_KEY}):
            status, _, body = https("POST", "/v2/models/simple/infer", SIMPLE, headers)
            self.assertEqual(status, 200, body)
            self.assertEqual(json.loads(body)["outputs"][0]["data"][:3], [1, 2, 3])
        for headers in (bearer("wrong-key-0123456789abcd"), {"x-api-key": "nope"},
                        {"Authorization": "Basic Y2k6a2V5"}):
            status, _, body = https("POST", "/v2/models/simple/infer", SIMPLE, headers)
            self.assertEqual(status, 401, (headers, body))
            self.assertNotIn("0123456789", body.decode())
        self.assertServing()

    def test_a_refused_request_is_answered_before_its_body_is_sent(self):
        # A gigabyte announced, none of it sent: the refusal cannot wait for the body.
        context = ssl.create_default_context(cafile=PKI.ca)
        raw = socket.create_connection(("127.0.0.1", G.port("http")), timeout=10)
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                        b"Authorization: Bearer wrong-key-0123456789abcd\r\n"
                        b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n")
            reply = b""
            while b"\r\n\r\n" not in reply:
                chunk = tls.recv(65536)
                if not chunk:
                    break
                reply += chunk
        self.assertTrue(reply.startswith(b"HTTP/1.1 401"), reply[:200])
        self.assertIn(b"Connection: close", reply)
        # Admitted at the same point, the request then reads its body as usual.
        status, _, body = https("POST", "/v2/models/simple/infer", SIMPLE, bearer(CI_KEY))
        self.assertEqual(status, 200, body)
        self.assertServing()

    def test_public_health_needs_nothing_but_refuses_a_bad_key(self):
        self.assertEqual(https("GET", "/v2/health/live")[0], 200)
        self.assertEqual(https("GET", "/v2/health/live", headers=bearer("bad-key-000000000000"))[0], 401)

    def test_model_repository_only_for_ops_by_key_or_certificate(self):
        load = "/v2/repository/models/simple/load"
        self.assertEqual(https("POST", load, "{}")[0], 401)
        status, _, body = https("POST", load, "{}", bearer(CI_KEY))
        self.assertEqual(status, 403, body)
        self.assertEqual(json.loads(body)["error"],
                         "principal 'ci' may not use API group 'model-repository'")
        self.assertEqual(https("POST", load, "{}", bearer(OPS_KEY))[0], 200)
        self.assertEqual(https("POST", load, "{}", cert="ops")[0], 200)
        self.assertEqual(https("POST", load, "{}", cert="other")[0], 401,
                         "a verified certificate no principal names is anonymous")
        self.assertEqual(https("POST", "/v2/repository/index", "{}", cert="ops")[0], 200)
        self.assertServing()

    def test_statistics_only_on_grpc_and_logging_denied(self):
        pb = grpc_stubs.load()[0]
        status, _, body = https("GET", "/v2/models/stats", headers=bearer(CI_KEY))
        self.assertEqual(status, 403)
        self.assertIn("not served on the http listener", json.loads(body)["error"])
        outcome = grpc_call("ModelStatistics", pb.ModelStatisticsRequest(), grpc_auth(CI_KEY))
        self.assertEqual(outcome[0], "ok", outcome)
        code, _ = grpc_call("ModelStatistics", pb.ModelStatisticsRequest(), grpc_auth(WEB_KEY))
        self.assertEqual(code, grpc.StatusCode.PERMISSION_DENIED)
        code, _ = grpc_call("ModelStatistics", pb.ModelStatisticsRequest())
        self.assertEqual(code, grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(https("GET", "/v2/logging", headers=bearer(OPS_KEY))[0], 403)
        code, details = grpc_call("LogSettings", pb.LogSettingsRequest(), grpc_auth(OPS_KEY))
        self.assertEqual(code, grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn("API group 'logging' is denied", details)

    def test_grpc_inference_and_streams(self):
        request = grpc_stubs.simple_infer_request()
        self.assertEqual(grpc_call("ModelInfer", request)[0], grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(grpc_call("ModelInfer", request, grpc_auth("x" * 20))[0],
                         grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(grpc_call("ModelInfer", request, grpc_auth(CI_KEY))[0], "ok")
        self.assertEqual(grpc_call("ModelInfer", request, (("x-api-key", WEB_KEY),))[0], "ok")
        stub = grpc_stubs.stub_of(G)
        answers = list(stub.ModelStreamInfer(iter([request, request]), metadata=grpc_auth(CI_KEY),
                                             timeout=10))
        self.assertEqual([a.error_message for a in answers], ["", ""])
        with self.assertRaises(grpc.RpcError) as refused:
            list(stub.ModelStreamInfer(iter([request]), timeout=10))
        self.assertEqual(refused.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        # The default rule of a public listener (grpc is `public: true`): shared memory.
        pb = grpc_stubs.load()[0]
        code, details = grpc_call("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(),
                                  grpc_auth(OPS_KEY))
        self.assertEqual(code, grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn("not served on a public listener", details)


class Jwt(unittest.TestCase):
    def test_each_algorithm_names_its_subject(self):
        for alg in ("HS256", "RS256", "ES256"):
            status, _, body = https("POST", "/v2/models/simple/infer", SIMPLE,
                                    bearer(token(alg, f"svc-{alg}")))
            self.assertEqual(status, 200, (alg, body))

    def test_bad_tokens_are_refused(self):
        cases = {"expired": token("RS256", "svc", exp_in=-600),
                 "wrong audience": token("ES256", "svc", aud="someone-else"),
                 "wrong issuer": token("HS256", "svc", iss="https://evil.test")}
        tampered = token("RS256", "svc").split(".")
        tampered[1] = b64url(json.dumps({"sub": "ops", "aud": "infergate",
                                         "iss": "https://issuer.test",
                                         "exp": int(time.time()) + 600}).encode())
        cases["bad signature"] = ".".join(tampered)
        for what, jwt in cases.items():
            status, _, body = https("POST", "/v2/models/simple/infer", SIMPLE, bearer(jwt))
            self.assertEqual(status, 401, what)
            self.assertIn(what, json.loads(body)["error"])

    def test_route_rule_admits_a_token_subject(self):
        path = "/v2/models/identity_int32/infer"
        self.assertEqual(https("POST", path, IDENTITY, bearer(CI_KEY))[0], 403)
        self.assertEqual(https("POST", path, IDENTITY, bearer(token("HS256", "svc-es")))[0], 200)
        status, _, body = https("POST", path, IDENTITY, bearer(token("ES256", "svc-other")))
        self.assertEqual(status, 403)
        self.assertEqual(json.loads(body)["error"], "principal 'svc-other' may not use route 'secret'")
        request = grpc_stubs.load()[0].ModelInferRequest(model_name="identity_int32")
        self.assertEqual(grpc_call("ModelInfer", request, grpc_auth(WEB_KEY))[0],
                         grpc.StatusCode.PERMISSION_DENIED)


class RateLimits(unittest.TestCase):
    def test_each_principal_has_its_own_bucket(self):
        path = "/v2/models/identity_int8/infer"
        statuses = [https("POST", path, LIMITED, bearer(WEB_KEY))[0] for _ in range(3)]
        self.assertEqual(statuses, [200, 200, 429])
        status, headers, body = https("POST", path, LIMITED, bearer(WEB_KEY))
        self.assertEqual(status, 429)
        self.assertRegex(headers["retry-after"], r"^[1-9][0-9]*$")  # one header, the real wait
        self.assertIn("rate limit", json.loads(body)["error"])
        # Another principal, and another model, are not limited by web's bucket.
        self.assertEqual(https("POST", path, LIMITED, bearer(OPS_KEY))[0], 200)
        self.assertEqual(https("POST", "/v2/models/simple/infer", SIMPLE, bearer(WEB_KEY))[0], 200)
        req = grpc_stubs.load()[0].ModelInferRequest(model_name="identity_int8")
        code, _ = grpc_call("ModelInfer", req, (("x-api-key", WEB_KEY),))
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED)


class KeyRotation(unittest.TestCase):
    def test_a_rotated_key_file_takes_effect_without_a_reload(self):
        path = os.path.join(TMP.name, "ci_keys")
        self.assertEqual(https("POST", "/v2/models/simple/infer", SIMPLE, bearer(CI_KEY))[0], 200)
        write(path, CI_ROTATED + "\n")
        wait_until(lambda: https("POST", "/v2/models/simple/infer", SIMPLE,
                                 bearer(CI_ROTATED))[0] == 200, timeout=15)
        self.assertEqual(https("POST", "/v2/models/simple/infer", SIMPLE, bearer(CI_KEY))[0], 401)
        # A broken file is reported and the keys in use stay.
        write(path, "short\n")
        wait_until(lambda: any('"auth_reload"' in l and '"ok":false' in l for l in G.stderr_lines),
                   timeout=15)
        self.assertEqual(https("POST", "/v2/models/simple/infer", SIMPLE, bearer(CI_ROTATED))[0], 200)
        write(path, f"{CI_KEY}\n{CI_ROTATED}\n")
        wait_until(lambda: https("POST", "/v2/models/simple/infer", SIMPLE,
                                 bearer(CI_KEY))[0] == 200, timeout=15)


class AccessLog(unittest.TestCase):
    def test_principal_logged_credentials_never(self):
        https("POST", "/v2/models/simple/infer", SIMPLE, bearer(OPS_KEY))
        https("POST", "/v2/models/simple/infer", SIMPLE, bearer("wrong-key-0123456789abcd"))
        log = os.path.join(TMP.name, "access.log")
        def read():
            with open(log) as f:
                return f.read()
        wait_until(lambda: os.path.exists(log) and read().count("\n") >= 2)
        text = read()
        principals = [json.loads(line)["principal"] for line in text.splitlines()]
        self.assertIn("ops", principals)
        self.assertIn("", principals)
        for secret in (OPS_KEY, CI_KEY, WEB_KEY, "wrong-key", HS_SECRET.decode()):
            self.assertNotIn(secret, text)
        self.assertNotIn(OPS_KEY, "".join(G.stderr_lines))


class AdminApi(unittest.TestCase):
    """auth.api_groups.admin: [ops] guards /admin/ on the metrics listener; /metrics stays
    open. A refusal comes before the path is looked at."""

    def test_only_ops_reaches_the_admin_api(self):
        for method, path in (("GET", "/admin/routes"), ("GET", "/admin/upstreams"),
                             ("POST", "/admin/reload"), ("GET", "/admin/nothing-here")):
            with self.subTest(path=path):
                status, headers, body = G.request(method, path, b"", listener="metrics")
                self.assertEqual(status, 401, body)
                self.assertEqual(headers.get("www-authenticate"), 'Bearer realm="infergate"')
                self.assertEqual(json.loads(body)["error"], "credentials are required for API group 'admin'")
                status, _, body = G.request(method, path, b"", {"x-api-key": WEB_KEY}, listener="metrics")
                self.assertEqual(status, 403, body)
                self.assertEqual(json.loads(body)["error"], "principal 'web' may not use API group 'admin'")
                status, _, body = G.request(method, path, b"", {"Authorization": "Bearer not-a-key-of-anyone"},
                                            listener="metrics")
                self.assertEqual(status, 401, body)
        status, _, body = G.request("GET", "/admin/routes", headers={"x-api-key": OPS_KEY}, listener="metrics")
        self.assertEqual(status, 200, body)
        self.assertIn("generation", json.loads(body))
        status, _, body = G.request("POST", "/admin/reload", b"", {"Authorization": "Bearer " + OPS_KEY},
                                    listener="metrics")
        self.assertEqual(status, 200, body)
        self.assertTrue(json.loads(body)["reloaded"])
        status, _, body = G.request("GET", "/admin/nothing-here", headers={"x-api-key": OPS_KEY}, listener="metrics")
        self.assertEqual(status, 404, body)
        status, _, body = G.request("GET", "/metrics", listener="metrics")
        self.assertEqual(status, 200)
        self.assertIn(b"infergate_", body)


class PublicListenerDefaults(unittest.TestCase):
    """No auth section: a public listener refuses the sensitive groups; a private one not."""

    CONFIG = """
listeners:
  http: { address: "127.0.0.1:0", public: $public }
  grpc: { address: "127.0.0.1:0", public: $public }
  metrics: { address: "127.0.0.1:0", public: $public }
shm: { enabled: true, allowed_key_prefixes: ["/infergate_e2e_"] }
upstreams: [{ name: demo, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: demo }]
"""

    def test_sensitive_groups_refused_on_public_listeners(self):
        pub = P.start("pub", Gateway.from_template(self.CONFIG, public="true"))
        priv = P.start("priv", Gateway.from_template(self.CONFIG, public="false"))
        try:
            for path, method, body in (("/v2/repository/models/simple/load", "POST", "{}"),
                                       ("/v2/systemsharedmemory/status", "GET", None),
                                       ("/v2/logging", "GET", None),
                                       ("/v2/trace/setting", "GET", None)):
                status, _, text = pub.request(method, path, body)
                self.assertEqual(status, 403, path)
                self.assertIn("not served on a public listener", json.loads(text)["error"])
                self.assertEqual(priv.request(method, path, body)[0], 200, path)
            for path, method, body in (("/v2/repository/index", "POST", "{}"),
                                       ("/v2/models/simple/infer", "POST", SIMPLE),
                                       ("/v2/models/simple/config", "GET", None)):
                self.assertEqual(pub.request(method, path, body)[0], 200, path)
            pb = grpc_stubs.load()[0]
            stub = grpc_stubs.stub_of(pub)
            code, _ = grpc_stubs.grpc_outcome(lambda: stub.RepositoryModelUnload(
                pb.RepositoryModelUnloadRequest(model_name="simple"), timeout=10))
            self.assertEqual(code, grpc.StatusCode.PERMISSION_DENIED)
            self.assertEqual(grpc_stubs.grpc_outcome(lambda: stub.RepositoryIndex(
                pb.RepositoryIndexRequest(), timeout=10))[0], "ok")
            # The admin API on a public metrics listener: this client is on loopback, which
            # the default serves (an operator on the host); from the network it is refused
            # (tls/auth_test.cc, AccessPolicy.TheAdminApiIsPrivateByDefault...).
            for g in (pub, priv):
                self.assertEqual(g.request("GET", "/admin/routes", listener="metrics")[0], 200)
        finally:
            P.stop(pub)
            P.stop(priv)


if __name__ == "__main__":
    unittest.main()
