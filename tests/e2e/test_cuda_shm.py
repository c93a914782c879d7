"""End-to-end: CUDA shared memory (PROTOCOL.md 8) on a real GPU, with real processes on
loopback. Skipped, with the reason, where the build has no CUDA or the machine no GPU
(ctest reports it as skipped); scripts/gpu-check runs it on a GPU machine.

The client's side of a region is shm_cuda_client_region (shm/cuda_standalone/), a separate
process as a Triton client would be: it allocates device memory, prints the
cudaIpcMemHandle_t, and writes inputs and reads outputs when told (INFERGATE_CUDA_CLIENT
names it; ctest sets it).

  U   a builtin infergate with client shm on: the remote upstream of G's u-grpc / u-http,
      and the colocated upstream of G_pool (whose pools are CUDA allocations)
  G   the gateway under test: shm on; every model on three routes chosen by the header /
      metadata x-path:
        x-path: grpc  -> u-grpc  (U over gRPC, not colocated: tensors go inline)
        x-path: http  -> u-http  (U over HTTP, likewise)
        (none)        -> local   (builtin models in G itself)
  G_pool  colocated upstreams in front of U, chosen by x-path: pool-grpc (no header) and
      pool-http (x-path: http) with a CUDA handoff pool each (kind: cuda, device 0);
      pass-grpc (x-path: pass) and pass-http (x-path: passh) with no pool and pass-through
      on: a client's CUDA region is registered at U with the client's own IPC handle, and
      tensors in it travel by reference

Output bytes are read back from the device and compared with numpy; the bytes around each
output are the region's fill byte, which must survive. Every process must exit 0 on
SIGTERM without a sanitizer report.
"""
import base64
import os
import subprocess
import unittest

import numpy as np

import grpc_stubs
from grpc_stubs import grpc_outcome, stub_of
from harness import LOOPBACK_HEAD, Gateway, Processes, wait_until
from shm_helpers import (THREE_PATH_GATEWAY, In, Out, grpc_infer, grpc_infer_request, handoff,
                         http_binary_infer, http_infer, http_json, http_status, http_unregister,
                         stop_processes)

FILL = 0xA5  # what the client program fills a new allocation with
PATHS = ("local", "grpc", "http")
SKIP_PREFIX = "CUDA end-to-end skipped: "  # ctest's SKIP_REGULAR_EXPRESSION

U = G = G_POOL = None
PROCESSES = Processes()

G_TEMPLATE = THREE_PATH_GATEWAY + """shm:
  enabled: true
  allowed_key_prefixes: ["/infergate_e2ec_"]
  max_regions: 16
"""

MIN_BYTES = 65536
POOL_BYTES = 4 << 20
HANDOFF = "{ min_bytes: %d, pool_bytes: %d, kind: cuda, device: 0, passthrough: false }" % (
    MIN_BYTES, POOL_BYTES)
PASSTHROUGH = "{ min_bytes: %d, pool_bytes: 0, passthrough: true }" % MIN_BYTES

G_POOL_TEMPLATE = LOOPBACK_HEAD + """upstreams:
  - name: pool-grpc
    protocol: grpc
    endpoints: ["$u_grpc"]
    colocated: true
    timeout_ms: 30000
    handoff: %(handoff)s
  - name: pool-http
    protocol: http
    endpoints: ["$u_http"]
    colocated: true
    timeout_ms: 30000
    handoff: %(handoff)s
  - name: pass-grpc
    protocol: grpc
    endpoints: ["$u_grpc"]
    colocated: true
    timeout_ms: 30000
    handoff: %(passthrough)s
  - name: pass-http
    protocol: http
    endpoints: ["$u_http"]
    colocated: true
    timeout_ms: 30000
    handoff: %(passthrough)s
routes:
  - match: { model: "*", headers: { x-path: http } }
    upstream: pool-http
  - match: { model: "*", headers: { x-path: pass } }
    upstream: pass-grpc
  - match: { model: "*", headers: { x-path: passh } }
    upstream: pass-http
  - match: { model: "*" }
    upstream: pool-grpc
shm:
  enabled: true
  max_regions: 16
""" % {"handoff": HANDOFF, "passthrough": PASSTHROUGH}

UPSTREAM_SHM = """shm:
  enabled: true
  allowed_key_prefixes: ["/infergate_"]
"""


# ---- the client's device memory ----------------------------------------------------------

def client_program():
    return os.environ.get("INFERGATE_CUDA_CLIENT", "")


class DeviceRegion:
    """Device memory of a separate client process (shm_cuda_client_region): `handle` is
    the 64-byte cudaIpcMemHandle_t a registration carries."""

    def __init__(self, byte_size, device=0):
        self.byte_size = byte_size
        self.proc = subprocess.Popen([client_program(), str(byte_size), str(device)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        first = self.proc.stdout.readline().strip()
        if not first.startswith("handle "):
            self.proc.kill()
            code = self.proc.wait(timeout=30)
            raise RuntimeError("the CUDA client exited %d: %r" % (code, first))
        self.handle = bytes.fromhex(first.split()[1])

    def _ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if answer.startswith("error"):
            raise RuntimeError("the CUDA client answered %r to %r" % (answer, line[:80]))
        return answer

    def write(self, offset, data):
        self._ask("write %d %s" % (offset, bytes(data).hex()))

    def read(self, offset, size):
        return bytes.fromhex(self._ask("read %d %d" % (offset, size)).split()[1])

    def fill(self, value=FILL):
        self._ask("fill %d" % value)

    def free(self):
        self._ask("free")

    def close(self):
        if self.proc is not None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            code = self.proc.wait(timeout=30)
            self.proc.stdout.close()
            self.proc = None
            assert code == 0, "the CUDA client exited %d" % code


def skip_reason():
    """Why this machine cannot run the module, or None."""
    program = client_program()
    if not program:
        return "the build has no CUDA (no shm_cuda_client_region)"
    probe = subprocess.run([program, "1"], input="quit\n", capture_output=True, text=True, timeout=60)
    if probe.returncode == 77:
        return probe.stdout.strip()
    if probe.returncode != 0:
        raise RuntimeError("the CUDA client failed (%d): %s %s" % (probe.returncode, probe.stdout,
                                                                  probe.stderr))
    return None


# ---- module set-up -----------------------------------------------------------------------

def setUpModule():
    global U, G, G_POOL
    reason = skip_reason()
    if reason:
        print(SKIP_PREFIX + reason, flush=True)
        raise unittest.SkipTest(SKIP_PREFIX + reason)
    grpc_stubs.load()
    try:
        U = PROCESSES.start("U", Gateway.builtin_upstream(extra=UPSTREAM_SHM))
        G = PROCESSES.start("G", Gateway.from_template(G_TEMPLATE, u_grpc=U.address("grpc"),
                                                       u_http=U.address("http")))
        G_POOL = PROCESSES.start("G_pool", Gateway.from_template(
            G_POOL_TEMPLATE, u_grpc=U.address("grpc"), u_http=U.address("http")))
    except BaseException:
        stop_processes(PROCESSES)
        raise


def tearDownModule():
    problems = stop_processes(PROCESSES)
    assert not problems, "\n".join(problems)


# ---- calls -------------------------------------------------------------------------------

def http_register_cuda(gw, name, handle, byte_size, device_id=0):
    return http_json(gw, "POST", "/v2/cudasharedmemory/region/%s/register" % name,
                     {"raw_handle": {"b64": base64.b64encode(handle).decode()},
                      "device_id": device_id, "byte_size": byte_size})


def grpc_register_cuda(gw, name, handle, byte_size, device_id=0):
    pb = grpc_stubs.load()[0]
    return grpc_outcome(lambda: stub_of(gw).CudaSharedMemoryRegister(
        pb.CudaSharedMemoryRegisterRequest(name=name, raw_handle=handle, device_id=device_id,
                                           byte_size=byte_size), timeout=30))


def grpc_cuda_status(gw, name=""):
    pb = grpc_stubs.load()[0]
    return grpc_outcome(lambda: stub_of(gw).CudaSharedMemoryStatus(
        pb.CudaSharedMemoryStatusRequest(name=name), timeout=30))


def i32(values):
    return np.asarray(values, dtype="<i4")


class CudaCase(unittest.TestCase):
    """Regions made by a test are closed whatever happens; every CUDA region of the
    gateway the test uses (gateway(): G unless overridden) is unregistered before and after
    each test."""

    def gateway(self):
        return G

    def setUp(self):
        self.regions = []
        self.assertEqual(http_unregister(self.gateway(), kind="cuda"), (200, None))

    def tearDown(self):
        try:
            self.assertEqual(http_unregister(self.gateway(), kind="cuda"), (200, None))
        finally:
            problems = []
            for r in self.regions:  # every one closed, whatever the others did
                try:
                    r.close()
                except (AssertionError, OSError, subprocess.SubprocessError) as e:
                    problems.append(str(e))
            self.assertEqual(problems, [])

    def region(self, byte_size):
        r = DeviceRegion(byte_size)
        self.regions.append(r)
        return r

    def assertRefused(self, outcome, status, *words):
        got_status, body = outcome
        self.assertEqual(got_status, status, body)
        self.assertIsInstance(body, dict)
        for w in words:
            self.assertIn(w, body["error"])


# ---- 1. register / status / unregister -----------------------------------------------------

class RegisterTest(CudaCase):

    def test_register_status_unregister_on_both_frontends(self):
        a, b = self.region(4096), self.region(1 << 20)
        self.assertEqual(http_register_cuda(G, "ca", a.handle, 4096), (200, None))
        self.assertEqual(grpc_register_cuda(G, "cb", b.handle, 1000)[0], "ok")
        self.assertEqual(http_status(G, kind="cuda"), (200, [
            {"name": "ca", "device_id": 0, "byte_size": 4096},
            {"name": "cb", "device_id": 0, "byte_size": 1000}]))
        code, resp = grpc_cuda_status(G)
        self.assertEqual(code, "ok")
        self.assertEqual({n: (r.device_id, r.byte_size) for n, r in resp.regions.items()},
                         {"ca": (0, 4096), "cb": (0, 1000)})
        # A CUDA region is not a system one, and a name is taken for both kinds.
        self.assertEqual(http_status(G, "ca")[0], 404)
        self.assertRefused(http_register_cuda(G, "cb", a.handle, 64), 400, "cb")
        self.assertEqual(grpc_register_cuda(G, "ca", b.handle, 64)[0].name, "ALREADY_EXISTS")
        self.assertEqual(http_unregister(G, "ca", kind="cuda"), (200, None))
        self.assertEqual(http_status(G, "ca", kind="cuda")[0], 404)
        self.assertEqual(http_status(G, kind="cuda"),
                         (200, [{"name": "cb", "device_id": 0, "byte_size": 1000}]))

    def test_bad_registrations_are_refused_and_the_gateway_serves_on(self):
        r = self.region(4096)
        # More bytes than the allocation has: refused when the handle is opened.
        self.assertRefused(http_register_cuda(G, "big", r.handle, 1 << 30), 400, "big")
        self.assertEqual(grpc_register_cuda(G, "big", r.handle, 1 << 30)[0].name, "INVALID_ARGUMENT")
        # A device this machine does not have.
        self.assertRefused(http_register_cuda(G, "dev", r.handle, 4096, device_id=1000), 400,
                           "device_id 1000 does not exist")
        # Bytes that are no handle of any process.
        self.assertRefused(http_register_cuda(G, "junk", bytes(range(64)), 64), 400, "junk")
        # The handle of memory its owner has freed.
        gone = self.region(8192)
        gone.free()
        self.assertRefused(http_register_cuda(G, "gone", gone.handle, 64), 400, "gone")
        self.assertEqual(http_status(G, kind="cuda"), (200, []))
        # The same handle registered properly still works, and so does everything else.
        self.assertEqual(http_register_cuda(G, "fine", r.handle, 4096), (200, None))
        status, body = http_infer(G, "identity_int32", [In("INPUT0", "INT32", [1, 3], i32([1, 2, 3]))])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["data"], [1, 2, 3])


# ---- 2. inference with tensors in device memory ----------------------------------------------

class InferTest(CudaCase):
    """`simple` (OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, INT32 [1, 16]) with
    both inputs read from one device region and both outputs written into it, 64 bytes
    each, a gap of fill bytes around every output."""

    LAYOUT = {"INPUT0": 0, "INPUT1": 64, "OUTPUT0": 160, "OUTPUT1": 288}
    SIZE = 416

    def run_simple(self, client, path, seed):
        r = self.region(self.SIZE)
        rng = np.random.default_rng(seed)
        in0 = rng.integers(-2 ** 20, 2 ** 20, size=16).astype("<i4")
        in1 = rng.integers(-2 ** 20, 2 ** 20, size=16).astype("<i4")
        r.write(self.LAYOUT["INPUT0"], in0.tobytes())
        r.write(self.LAYOUT["INPUT1"], in1.tobytes())
        name = "simple_%s_%s" % (client, path)
        self.assertEqual(http_register_cuda(G, name, r.handle, self.SIZE), (200, None))

        def ref(tensor):
            return (name, 64, self.LAYOUT[tensor])

        inputs = [In("INPUT0", "INT32", [1, 16], shm=ref("INPUT0")),
                  In("INPUT1", "INT32", [1, 16], shm=ref("INPUT1"))]
        outputs = [Out("OUTPUT0", shm=ref("OUTPUT0")), Out("OUTPUT1", shm=ref("OUTPUT1"))]
        if client == "http":
            status, body = http_infer(G, "simple", inputs, outputs, path=path)
            self.assertEqual(status, 200, body)
            got = {o["name"]: o for o in body["outputs"]}
            self.assertEqual(sorted(got), ["OUTPUT0", "OUTPUT1"])
            for o in got.values():
                self.assertNotIn("data", o)  # the tensor is in the region, as Triton answers
                self.assertEqual((o["datatype"], o["shape"]), ("INT32", [1, 16]))
        else:
            code, resp = grpc_infer(G, grpc_infer_request("simple", inputs, outputs), path)
            self.assertEqual(code, "ok", resp)
            self.assertEqual(sorted(o.name for o in resp.outputs), ["OUTPUT0", "OUTPUT1"])
            self.assertTrue(all(len(raw) == 0 for raw in resp.raw_output_contents))

        whole = r.read(0, self.SIZE)
        out0 = np.frombuffer(whole[160:224], dtype="<i4")
        out1 = np.frombuffer(whole[288:352], dtype="<i4")
        self.assertTrue(np.array_equal(out0, in0 + in1), (out0, in0 + in1))
        self.assertTrue(np.array_equal(out1, in0 - in1), (out1, in0 - in1))
        # Inputs untouched, every byte around the outputs still the fill byte.
        self.assertEqual(whole[0:64], in0.tobytes())
        self.assertEqual(whole[64:128], in1.tobytes())
        for lo, hi in ((128, 160), (224, 288), (352, self.SIZE)):
            self.assertEqual(whole[lo:hi], bytes([FILL]) * (hi - lo), (lo, hi))

    def test_simple_on_every_path_from_both_clients(self):
        seed = 0
        for path in PATHS:
            for client in ("http", "grpc"):
                seed += 1
                with self.subTest(path=path, client=client):
                    self.run_simple(client, path, seed)

    def test_remote_upstreams_never_see_the_region(self):
        # U holds G_pool's pools (and, for a while, its pass-through copies); nothing of G's.
        def names_at_u():
            status, regions = http_status(U, kind="cuda")
            self.assertEqual(status, 200, regions)
            return {r["name"] for r in regions}

        before = names_at_u()
        self.run_simple("http", "grpc", 100)
        self.run_simple("grpc", "http", 101)
        self.assertEqual(names_at_u(), before)

    def test_bad_references_are_refused(self):
        r = self.region(256)
        self.assertEqual(http_register_cuda(G, "small", r.handle, 256), (200, None))
        for path in PATHS:
            with self.subTest(path=path):
                # Past the end of the region.
                status, body = http_infer(G, "identity_int32", [
                    In("INPUT0", "INT32", [1, 16], shm=("small", 64, 224))], path=path)
                self.assertEqual(status, 400, body)
                self.assertIn("small", body["error"])
                # A byte size that is not the tensor's.
                status, body = http_infer(G, "identity_int32", [
                    In("INPUT0", "INT32", [1, 16], shm=("small", 60, 0))], path=path)
                self.assertEqual(status, 400, body)
                # An output region too small for the output.
                status, body = http_infer(G, "identity_int32", [
                    In("INPUT0", "INT32", [1, 16], i32(range(16)))],
                    [Out("OUTPUT0", shm=("small", 32, 0))], path=path)
                self.assertIn(status, (400, 500), body)
                self.assertIn("error", body)
        # Unregistered: a request naming it is refused; the memory itself is left alone.
        r.write(0, i32(range(16)).tobytes())
        self.assertEqual(http_unregister(G, "small", kind="cuda"), (200, None))
        status, body = http_infer(G, "identity_int32", [
            In("INPUT0", "INT32", [1, 16], shm=("small", 64, 0))])
        self.assertIn(status, (400, 404), body)
        self.assertIn("small", body["error"])
        self.assertEqual(r.read(0, 64), i32(range(16)).tobytes())


# ---- 3. the CUDA handoff pool --------------------------------------------------------------

class PoolTest(unittest.TestCase):

    def test_large_tensors_go_through_device_memory_on_both_protocols(self):
        size = 256 << 10
        for upstream, path in (("pool-grpc", None), ("pool-http", "http")):
            with self.subTest(upstream=upstream):
                before = handoff(G_POOL, upstream)
                self.assertTrue(before["pool_ready"], before)
                for i in range(3):
                    values = np.random.default_rng(i).standard_normal(size // 4).astype("<f4")
                    got = http_binary_infer(G_POOL, values, path)
                    self.assertEqual(got.tobytes(), values.tobytes())
                after = handoff(G_POOL, upstream)
                self.assertEqual(after["pool_bytes_in"] - before["pool_bytes_in"], 3 * size, after)
                self.assertGreaterEqual(after["pool_bytes_out"] - before["pool_bytes_out"], 2 * size, after)
                self.assertEqual(after["refusals"], 0, after)
        # U holds the pools as CUDA regions on device 0, one per colocated upstream.
        status, regions = http_status(U, kind="cuda")
        self.assertEqual(status, 200, regions)
        pools = [r for r in regions if r["name"].startswith("infergate_pool_")]
        self.assertEqual(len(pools), 2, regions)
        self.assertTrue(all(r["device_id"] == 0 and r["byte_size"] == POOL_BYTES for r in pools),
                        regions)

    def test_small_tensors_stay_inline(self):
        before = handoff(G_POOL, "pool-grpc")
        values = np.arange(16, dtype="<f4")
        self.assertEqual(http_binary_infer(G_POOL, values).tobytes(), values.tobytes())
        after = handoff(G_POOL, "pool-grpc")
        self.assertEqual(after["pool_bytes_in"], before["pool_bytes_in"])


# ---- 4. client regions passed through by their handle ----------------------------------------

def client_copies_at(upstream, gw):
    """{name: (device_id, byte_size)} of the CUDA regions `upstream` holds for gateway `gw`'s
    clients (named infergate_r<pid>_...)."""
    status, regions = http_status(upstream, kind="cuda")
    assert status == 200, regions
    own = "infergate_r%d_" % gw.proc.pid
    return {r["name"]: (r["device_id"], r["byte_size"]) for r in regions if r["name"].startswith(own)}


class PassthroughTest(CudaCase):

    def gateway(self):
        return G_POOL

    def run_case(self, client, path, upstream, seed):
        size = 256 << 10
        count = size // 4
        r = self.region(2 * size + 4096)
        name = "pass_%s_%s" % (client, path)
        self.assertEqual(http_register_cuda(G_POOL, name, r.handle, r.byte_size), (200, None))
        in_ref, out_ref = (name, size, 0), (name, size, size + 4096)
        inputs, outputs = [In("INPUT0", "UINT32", [1, count], shm=in_ref)], [Out("OUTPUT0", shm=out_ref)]

        def one(i):
            values = np.random.default_rng(seed + i).integers(0, 2 ** 32, size=count,
                                                              dtype=np.uint64).astype("<u4")
            r.write(0, values.tobytes())
            if client == "http":
                status, body = http_infer(G_POOL, "identity_uint32", inputs, outputs, path=path)
                self.assertEqual(status, 200, body)
                self.assertEqual(body["outputs"], [{"name": "OUTPUT0", "datatype": "UINT32",
                                                    "shape": [1, count]}])
            else:
                code, resp = grpc_infer(G_POOL, grpc_infer_request("identity_uint32", inputs, outputs),
                                        path)
                self.assertEqual(code, "ok", resp)
                self.assertEqual(list(resp.raw_output_contents), [b""])
            self.assertEqual(r.read(size + 4096, size), values.tobytes())
            self.assertEqual(r.read(size, 4096), bytes([FILL]) * 4096)

        before = handoff(G_POOL, upstream)
        one(0)  # inline: the gateway reads and writes the device memory, and queues the registration
        # Registered once U said so to the gateway (not only once U lists it).
        self.assertTrue(wait_until(lambda: handoff(G_POOL, upstream)["region_registrations"]
                                   == before["region_registrations"] + 1, timeout=10),
                        handoff(G_POOL, upstream))
        self.assertEqual(list(client_copies_at(U, G_POOL).values()), [(0, r.byte_size)])
        mid = handoff(G_POOL, upstream)
        for i in range(1, 4):
            one(i)
        after = handoff(G_POOL, upstream)
        # By reference: U read and wrote the client's memory itself, zero copies.
        self.assertEqual(after["passthrough_bytes"] - mid["passthrough_bytes"], 3 * 2 * size, after)
        self.assertEqual(after["inline_bytes"] - mid["inline_bytes"], 0, after)
        self.assertEqual(after["inline_retries"] - mid["inline_retries"], 0, after)
        # Unregistered at the gateway: gone at U within a few seconds.
        self.assertEqual(http_unregister(G_POOL, name, kind="cuda"), (200, None))
        self.assertTrue(wait_until(lambda: client_copies_at(U, G_POOL) == {}, timeout=10),
                        http_status(U, kind="cuda"))

    def test_grpc_upstream(self):
        self.run_case("http", "pass", "pass-grpc", 10)
        self.run_case("grpc", "pass", "pass-grpc", 20)

    def test_http_upstream(self):
        self.run_case("http", "passh", "pass-http", 30)
        self.run_case("grpc", "passh", "pass-http", 40)


if __name__ == "__main__":
    unittest.main()
