"""End-to-end: the sidecar pod of deploy/kubernetes/sidecar.yaml, played on one machine.

The infergate config is the one the manifest's ConfigMap carries, changed only where a
pod and this machine differ: listeners on loopback port 0 instead of 0.0.0.0:8000-8002,
the Secret mounts under a temporary directory instead of /var/run/secrets/infergate/,
and Triton's loopback gRPC port (127.0.0.1:8101) replaced by a real second infergate
serving the builtin models with client shared memory on (Triton with
--allow-client-shm=true). The config, the TLS Secret and the API-key Secret are
directories written the way the kubelet writes ConfigMap and Secret volumes: each file a
link through ..data to a timestamped directory, an update a new directory and one atomic
rename of ..data.

Checked: the kubelet's probes pass without a key; inference needs one, over HTTPS and
gRPC with TLS; a large tensor goes to the upstream through the handoff pool; an update of
the ConfigMap, of the API keys and of the certificate each takes effect without a
restart; SIGTERM drains and exits 0 with no sanitizer report and no pool left in /dev/shm.
"""
import datetime
import glob
import http.client
import json
import os
import re
import shutil
import ssl
import sys
import tempfile
import time
import unittest

import grpc
import numpy as np

import grpc_stubs
from harness import Gateway, Processes, wait_until
from pki import Pki, peer_serial

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "deploy"))
from deploy_files import gateway_config_text, manifest  # noqa: E402

U = G = G_PID = None
P = Processes()
PKI = None
POD = None            # the temporary directory standing for the pod's mounts
CONFIG = TLS = KEYS = None
KEY = "k8s-sidecar-key-0123456789abcdef"
KEY2 = "k8s-rotated-key-fedcba9876543210"

POOL_PREFIX = "/infergate_k8s_pool_"
UPSTREAM_SHM = """shm:
  enabled: true
  allowed_key_prefixes: ["%s"]
""" % POOL_PREFIX


class KubeletVolume:
    """A directory the way the kubelet keeps a ConfigMap or Secret volume: NAME -> ..data/NAME,
    ..data -> ..<timestamp>/; update() writes a new timestamped directory and renames a link
    to it over ..data in one step, then removes the old one (what a pod sees on a change)."""

    def __init__(self, root, files):
        self.root = root
        os.makedirs(root)
        self._current = None
        self.update(files)
        for name in files:
            os.symlink(os.path.join("..data", name), os.path.join(root, name))

    def update(self, files):
        stamp = "..%s" % datetime.datetime.now().strftime("%Y_%m_%d_%H_%M_%S.%f")
        target = os.path.join(self.root, stamp)
        os.makedirs(target)
        for name, data in files.items():
            with open(os.path.join(target, name), "wb") as f:
                f.write(data if isinstance(data, bytes) else data.encode())
        link = os.path.join(self.root, "..data_tmp")
        os.symlink(stamp, link)
        os.rename(link, os.path.join(self.root, "..data"))
        if self._current:
            shutil.rmtree(os.path.join(self.root, self._current))
        self._current = stamp

    def path(self, name):
        return os.path.join(self.root, name)


def pod_config(text, upstream_grpc):
    """The ConfigMap's config with this machine's addresses and mount points."""
    replacements = [('"0.0.0.0:8000"', '"127.0.0.1:0"'), ('"0.0.0.0:8001"', '"127.0.0.1:0"'),
                    ('"0.0.0.0:8002"', '"127.0.0.1:0"'),
                    ("/var/run/secrets/infergate/", POD + "/secrets/"),
                    ('"127.0.0.1:8101"', '"%s"' % upstream_grpc)]
    for old, new in replacements:
        if old not in text:
            raise AssertionError("the sidecar config no longer has %s" % old)
        text = text.replace(old, new)
    # A pool prefix of this module's own: gateways of tests running beside it on this
    # machine share one /dev/shm, and one starting with the default prefix would sweep the
    # stale pool test_5 leaves for G_next to find.
    text, n = re.subn(r"(\n\s*)kind: system", r'\1kind: system\1key_prefix: "%s"' % POOL_PREFIX, text)
    if n != 1:
        raise AssertionError("the sidecar config's handoff no longer has kind: system")
    return text


def setUpModule():
    global U, G, G_PID, PKI, POD, CONFIG, TLS, KEYS
    PKI = Pki()
    PKI.issue("server")
    POD = tempfile.mkdtemp(prefix="infergate-pod-")
    with open(PKI.cert("server"), "rb") as c, open(PKI.key("server"), "rb") as k:
        TLS = KubeletVolume(os.path.join(POD, "secrets", "tls"),
                            {"tls.crt": c.read(), "tls.key": k.read()})
    KEYS = KubeletVolume(os.path.join(POD, "secrets", "api-keys"), {"clients.keys": KEY + "\n"})
    U = P.start("U", Gateway.builtin_upstream(extra=UPSTREAM_SHM))
    text = pod_config(gateway_config_text(manifest("sidecar")), U.address("grpc"))
    CONFIG = KubeletVolume(os.path.join(POD, "config"), {"infergate.yaml": text})
    G = P.start("G", Gateway(config_path=CONFIG.path("infergate.yaml")))
    G_PID = G.proc.pid


def tearDownModule():
    grpc_stubs.close_channels()
    # While G runs its pool is there; after its exit, gone.
    had_pool = bool(G_PID and glob.glob("/dev/shm" + POOL_PREFIX + "%d_*" % G_PID))
    problems = P.stop_all()
    if G_PID and not had_pool:
        problems.append("G had no handoff pool in /dev/shm")
    # The pool is named after the gateway's pid (key_prefix + pid + "_" + n).
    pools = glob.glob("/dev/shm" + POOL_PREFIX + "%d_*" % G_PID) if G_PID else []
    shutil.rmtree(POD, ignore_errors=True)
    if PKI:
        PKI.cleanup()
    if problems:
        raise AssertionError("\n".join(problems))
    if pools:
        raise AssertionError("pools left in /dev/shm: %s" % pools)


def https(method, path, body=None, headers=None):
    """(status, headers, body) of one request on a new TLS connection to G."""
    conn = http.client.HTTPSConnection("127.0.0.1", G.port("http"), timeout=30,
                                       context=ssl.create_default_context(cafile=PKI.ca))
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def simple_body():
    return json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]})


def infer_status(model="simple", key=None):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["x-api-key"] = key
    status, _, body = https("POST", "/v2/models/%s/infer" % model, simple_body(), headers)
    return status, body


def ready():
    try:
        return https("GET", "/v2/health/ready")[0] == 200
    except OSError:
        return False


def admin_upstream():
    status, _, data = G.request("GET", "/admin/upstreams", listener="metrics")
    assert status == 200, data
    (upstream,) = json.loads(data)["upstreams"]
    return upstream


def grpc_stub():
    with open(PKI.ca, "rb") as f:
        credentials = grpc.ssl_channel_credentials(f.read())
    channel = grpc.secure_channel(G.address("grpc"), credentials, options=[
        ("grpc.max_send_message_length", 1 << 30), ("grpc.max_receive_message_length", 1 << 30)])
    pb, service, _, _ = grpc_stubs.load()
    return channel, service.GRPCInferenceServiceStub(channel), pb


class SidecarPod(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not wait_until(ready, timeout=30):
            raise AssertionError("the pod never became ready (is Triton's stand-in healthy?)")

    def test_1_probes_pass_without_a_key_and_inference_needs_one(self):
        status, headers, _ = https("GET", "/v2/health/live")
        self.assertEqual(status, 200)
        status, body = infer_status()
        self.assertEqual(status, 401, body)
        status, body = infer_status(key="not-a-key-of-this-pod-at-all")
        self.assertEqual(status, 401, body)
        status, body = infer_status(key=KEY)
        self.assertEqual(status, 200, body)
        outputs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
        self.assertEqual(outputs["OUTPUT0"], [i + 1 for i in range(16)])

    def test_2_grpc_over_tls_with_the_key_and_a_large_tensor_through_the_pool(self):
        before = admin_upstream()["endpoints"][0]["handoff"]
        self.assertTrue(before["pool_ready"], before)
        values = np.arange(65536, dtype="<f4")       # 256 KiB: past min_bytes (64 KiB)
        channel, stub, pb = grpc_stub()
        try:
            request = pb.ModelInferRequest(model_name="identity_fp32")
            tensor = request.inputs.add()
            tensor.name, tensor.datatype = "INPUT0", "FP32"
            tensor.shape.extend([1, values.size])
            request.raw_input_contents.append(values.tobytes())
            with self.assertRaises(grpc.RpcError) as refused:
                stub.ModelInfer(request, timeout=30)
            self.assertEqual(refused.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            response = stub.ModelInfer(request, metadata=[("x-api-key", KEY)], timeout=30)
        finally:
            channel.close()
        self.assertEqual(np.frombuffer(response.raw_output_contents[0], "<f4").tolist(),
                         values.tolist())
        after = admin_upstream()["endpoints"][0]["handoff"]
        self.assertEqual(after["pool_bytes_in"] - before["pool_bytes_in"], values.nbytes)

    def test_3_a_configmap_update_is_reloaded(self):
        status, _ = infer_status("simple-alias", key=KEY)
        self.assertNotEqual(status, 200)
        with open(CONFIG.path("infergate.yaml")) as f:
            text = f.read()
        alias = ("  - match: { model: simple-alias }\n    upstream: triton\n"
                 "    rewrite: { model: simple }\n")
        self.assertIn("routes:\n", text)
        CONFIG.update({"infergate.yaml": text.replace("routes:\n", "routes:\n" + alias, 1)})
        self.assertTrue(wait_until(lambda: infer_status("simple-alias", key=KEY)[0] == 200,
                                   timeout=30), "the new route never took effect")
        status, body = infer_status("simple-alias", key=KEY)
        self.assertEqual(json.loads(body)["model_name"], "simple-alias")

    def test_4_rotated_keys_and_certificate_take_effect(self):
        KEYS.update({"clients.keys": KEY2 + "\n"})
        self.assertTrue(wait_until(lambda: infer_status(key=KEY2)[0] == 200, timeout=30),
                        "the rotated key was never accepted")
        self.assertEqual(infer_status(key=KEY)[0], 401)
        renewed = PKI.issue("renewed", cn="renewed")
        with open(PKI.cert("renewed"), "rb") as c, open(PKI.key("renewed"), "rb") as k:
            TLS.update({"tls.crt": c.read(), "tls.key": k.read()})

        self.assertTrue(wait_until(lambda: peer_serial(G.port("http"), PKI.ca)
                                   == renewed.serial_number, timeout=30),
                        "the renewed certificate was never served")


    def test_5_a_killed_gateways_pool_is_freed_by_the_next_one(self):
        """The gateway container killed (an OOM kill) leaves its pool in the pod's /dev/shm,
        which outlives containers; the restarted gateway frees it and makes its own under a
        new name (pid and a random word), so no name of the dead one is reused."""
        with open(CONFIG.path("infergate.yaml")) as f:
            text = f.read()
        dead = Gateway(config=text).start()
        pools = lambda pid: glob.glob("/dev/shm" + POOL_PREFIX + "%d_*" % pid)
        try:
            self.assertTrue(wait_until(lambda: pools(dead.proc.pid), timeout=30))
            (left,) = pools(dead.proc.pid)
            dead.proc.kill()
            dead.proc.wait(timeout=30)
        finally:
            dead.proc.stdout.close()
            dead.proc.stderr.close()
            dead.proc = None
            dead.dir.cleanup()
        self.assertTrue(os.path.exists(left), "a killed gateway cannot remove its pool")
        hour_ago = time.time() - 3600  # past the 10 s a pool may spend before its lock
        os.utime(left, (hour_ago, hour_ago))
        successor = P.start("G_next", Gateway(config=text))
        try:
            self.assertFalse(os.path.exists(left), "the dead gateway's pool is still there")
            (own,) = pools(successor.proc.pid)
            self.assertNotEqual(os.path.basename(own), os.path.basename(left))
            log = "".join(successor.stderr_lines)
            self.assertTrue(wait_until(lambda: "handoff_stale_pools_removed" in
                                       "".join(successor.stderr_lines), timeout=10), log)
        finally:
            P.stop(successor)


if __name__ == "__main__":
    unittest.main()
