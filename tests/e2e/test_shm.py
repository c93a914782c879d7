"""End-to-end: client shared memory (PROTOCOL.md 8), with real processes on loopback (all
port 0) and POSIX shared-memory objects made here with multiprocessing.shared_memory.

  U            a builtin-only infergate, the remote upstream; client shm off (its own
               status must stay empty: it never sees a client's region)
  G            the gateway under test: shm on, keys allowed under "/infergate_e2e_", both
               listeners may register; three routes for every model, chosen by the
               header / metadata x-path:
                 x-path: grpc  -> u-grpc  (U over gRPC)
                 x-path: http  -> u-http  (U over HTTP)
                 (none)        -> local   (builtin models in G itself)
  G_off        builtin models, no shm section (client shm off, the default)
  G_grpc_only  builtin models, shm on with listeners: [grpc] and max_regions: 3

Every inference case runs on the three paths of G, from HTTP (JSON, and binary tensors
for one case) and gRPC clients. Output bytes are read back from the shm objects and
compared with numpy; the bytes around each output are a sentinel that must survive.
Every process must exit 0 on SIGTERM without a sanitizer report, and no shm object made
here may be left in /dev/shm.
"""
import base64
import json
import os
import threading
import time
import unittest

import grpc
import numpy as np

import grpc_stubs
from grpc_stubs import grpc_outcome, stub_of
from harness import LOOPBACK_HEAD, Gateway, Processes
import shm_helpers
from shm_helpers import (SENTINEL, In, Out, ShmObjects, grpc_infer, grpc_infer_request,
                         grpc_register, grpc_status, grpc_unregister, headers_of, http_infer, http_json,
                         http_register, http_status, http_unregister, metadata_of, shm_params,
                         stop_processes, tear_down, unregister_all)

pb = pb_grpc = health_pb = health_grpc = None
U = G = G_OFF = G_GRPC_ONLY = None
PROCESSES = Processes()

PID = os.getpid()
PREFIX = "infergate_e2e_%d_" % PID
OBJECTS = ShmObjects(PREFIX)  # every object made here, to check none is left behind
PATHS = ("local", "grpc", "http")
NO_GPU = not any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0"))

G_TEMPLATE = shm_helpers.THREE_PATH_GATEWAY + """shm:
  enabled: true
  allowed_key_prefixes: ["/infergate_e2e_"]
  listeners: [http, grpc]
  max_regions: 64
"""

LOCAL_TEMPLATE = LOOPBACK_HEAD + """upstreams:
  - { name: local, protocol: builtin }
routes:
  - match: { model: "*" }
    upstream: local
$shm
"""

GRPC_ONLY_SHM = """shm:
  enabled: true
  allowed_key_prefixes: ["/infergate_e2e_"]
  listeners: [grpc]
  max_regions: 3
"""


# ---- module set-up -----------------------------------------------------------------------

def setUpModule():
    global pb, pb_grpc, health_pb, health_grpc, U, G, G_OFF, G_GRPC_ONLY
    pb, pb_grpc, health_pb, health_grpc = grpc_stubs.load()
    start = PROCESSES.start
    try:
        U = start("U", Gateway.builtin_upstream())
        G = start("G", Gateway.from_template(G_TEMPLATE, u_grpc=U.address("grpc"),
                                             u_http=U.address("http")))
        G_OFF = start("G_off", Gateway.from_template(LOCAL_TEMPLATE, shm=""))
        G_GRPC_ONLY = start("G_grpc_only", Gateway.from_template(LOCAL_TEMPLATE, shm=GRPC_ONLY_SHM))
    except BaseException:
        stop_processes(PROCESSES)
        raise


def tearDownModule():
    problems = tear_down(PROCESSES, OBJECTS, "shared-memory objects")
    assert not problems, "\n".join(problems)


# ---- shared-memory objects ---------------------------------------------------------------

class ObjectsMixin(shm_helpers.ObjectsMixin):
    """Objects made by a test, closed and unlinked whatever happens; every system region of
    G unregistered after each test."""

    shm_objects = OBJECTS

    def gateway(self):
        return G


# ---- protocol helpers ----------------------------------------------------------------------

def grpc_outputs(resp):
    """{name: (InferOutputTensor, raw bytes or None)}; also checks the raw list's length."""
    raws = list(resp.raw_output_contents)
    assert len(raws) in (0, len(resp.outputs)), (len(raws), len(resp.outputs))
    return {o.name: (o, raws[i] if raws else None) for i, o in enumerate(resp.outputs)}


def i32(values):
    return np.array(values, dtype="<i4")


def rand_i32(count, seed):
    return np.random.default_rng(seed).integers(-2 ** 31, 2 ** 31, size=count, dtype=np.int64).astype("<i4")


def identity_inline_ok(testcase, gw, path, protocol="http"):
    """An ordinary identity_int32 request on `path` still answers right."""
    values = i32([7, -8, 9])
    if protocol == "http":
        status, body = http_infer(gw, "identity_int32", [In("INPUT0", "INT32", [1, 3], values)],
                                  path=path)
        testcase.assertEqual(status, 200, body)
        testcase.assertEqual(body["outputs"][0]["data"], [7, -8, 9])
    else:
        outcome = grpc_infer(gw, grpc_infer_request(
            "identity_int32", [In("INPUT0", "INT32", [1, 3], values)]), path)
        testcase.assertEqual(outcome[0], "ok", outcome)
        testcase.assertEqual(outcome[1].raw_output_contents[0], values.tobytes())


# ---- 1. register / status / unregister -----------------------------------------------------

class RegisterStatusUnregisterTest(ObjectsMixin, unittest.TestCase):

    def test_http_register_status_unregister(self):
        obj = self.make(8192)
        self.assertEqual(http_register(G, "h1", obj.key, 1000, offset=100), (200, None))
        self.assertEqual(http_register(G, "h2", obj.key, 8192), (200, None))
        status, body = http_status(G)
        self.assertEqual(status, 200)
        self.assertEqual(body, [
            {"name": "h1", "key": obj.key, "offset": 100, "byte_size": 1000},
            {"name": "h2", "key": obj.key, "offset": 0, "byte_size": 8192}])
        self.assertEqual(http_status(G, "h1"),
                         (200, [{"name": "h1", "key": obj.key, "offset": 100, "byte_size": 1000}]))
        self.assertEqual(http_unregister(G, "h1"), (200, None))
        self.assertEqual(http_status(G), (200, [
            {"name": "h2", "key": obj.key, "offset": 0, "byte_size": 8192}]))
        self.assertEqual(http_status(G, "h1"),
                         (404, {"error": "Unable to find system shared memory region: 'h1'"}))
        # Unregistering an unknown name succeeds silently.
        self.assertEqual(http_unregister(G, "h1"), (200, None))
        self.assertEqual(http_unregister(G, "never"), (200, None))
        self.assertEqual(http_unregister(G), (200, None))
        self.assertEqual(http_status(G), (200, []))

    def test_grpc_register_status_unregister(self):
        obj = self.make(4096)
        self.assertEqual(grpc_register(G, "g1", obj.key, 64, offset=32)[0], "ok")
        self.assertEqual(grpc_register(G, "g2", obj.key, 4096)[0], "ok")
        code, resp = grpc_status(G)
        self.assertEqual(code, "ok")
        self.assertEqual(set(resp.regions), {"g1", "g2"})
        g1 = resp.regions["g1"]
        self.assertEqual((g1.name, g1.key, g1.offset, g1.byte_size), ("g1", obj.key, 32, 64))
        g2 = resp.regions["g2"]
        self.assertEqual((g2.name, g2.key, g2.offset, g2.byte_size), ("g2", obj.key, 0, 4096))
        code, resp = grpc_status(G, "g2")
        self.assertEqual(code, "ok")
        self.assertEqual(list(resp.regions), ["g2"])
        self.assertEqual(grpc_unregister(G, "g2")[0], "ok")
        self.assertEqual(grpc_status(G, "g2"),
                         (grpc.StatusCode.NOT_FOUND, "Unable to find system shared memory region: 'g2'"))
        self.assertEqual(grpc_unregister(G, "g2")[0], "ok")  # unknown: OK
        self.assertEqual(list(grpc_status(G)[1].regions), ["g1"])
        self.assertEqual(grpc_unregister(G)[0], "ok")  # empty name: every system region
        self.assertEqual(len(grpc_status(G)[1].regions), 0)

    def test_one_table_for_both_frontends(self):
        obj = self.make(4096)
        self.assertEqual(http_register(G, "from_http", obj.key, 128, offset=8), (200, None))
        self.assertEqual(grpc_register(G, "from_grpc", obj.key, 256, offset=16)[0], "ok")
        code, resp = grpc_status(G)
        self.assertEqual(code, "ok")
        self.assertEqual({n: (r.key, r.offset, r.byte_size) for n, r in resp.regions.items()},
                         {"from_http": (obj.key, 8, 128), "from_grpc": (obj.key, 16, 256)})
        self.assertEqual(http_status(G), (200, [
            {"name": "from_grpc", "key": obj.key, "offset": 16, "byte_size": 256},
            {"name": "from_http", "key": obj.key, "offset": 8, "byte_size": 128}]))
        # A name taken on one frontend is taken on the other.
        self.assertEqual(grpc_register(G, "from_http", obj.key, 8)[0], grpc.StatusCode.ALREADY_EXISTS)
        self.assertEqual(http_register(G, "from_grpc", obj.key, 8)[0], 400)
        # Unregistered on one, gone on the other.
        self.assertEqual(grpc_unregister(G, "from_http")[0], "ok")
        self.assertEqual(http_status(G, "from_http")[0], 404)
        self.assertEqual(http_unregister(G, "from_grpc"), (200, None))
        self.assertEqual(len(grpc_status(G)[1].regions), 0)

    def test_kinds_share_names_but_not_status_or_unregister(self):
        obj = self.make(4096)
        self.assertEqual(http_register(G, "sys", obj.key, 64), (200, None))
        # CUDA status: empty, over both frontends; the system region is not a CUDA one.
        self.assertEqual(http_status(G, kind="cuda"), (200, []))
        code, resp = grpc_outcome(lambda: stub_of(G).CudaSharedMemoryStatus(
            pb.CudaSharedMemoryStatusRequest(), timeout=30))
        self.assertEqual(code, "ok")
        self.assertEqual(len(resp.regions), 0)
        status, body = http_status(G, "sys", kind="cuda")
        self.assertEqual((status, body), (404, {"error": "Unable to find cuda shared memory region: 'sys'"}))
        self.assertEqual(grpc_outcome(lambda: stub_of(G).CudaSharedMemoryStatus(
            pb.CudaSharedMemoryStatusRequest(name="sys"), timeout=30))[0], grpc.StatusCode.NOT_FOUND)
        # CUDA unregister (one and all) leaves the system region alone.
        self.assertEqual(http_unregister(G, "sys", kind="cuda"), (200, None))
        self.assertEqual(http_unregister(G, kind="cuda"), (200, None))
        self.assertEqual(grpc_outcome(lambda: stub_of(G).CudaSharedMemoryUnregister(
            pb.CudaSharedMemoryUnregisterRequest(), timeout=30))[0], "ok")
        self.assertEqual(http_status(G)[1], [{"name": "sys", "key": obj.key, "offset": 0, "byte_size": 64}])
        # One name space: a CUDA region cannot take a system region's name (answered before
        # the GPU is asked).
        handle = base64.b64encode(bytes(64)).decode()
        status, body = http_json(G, "POST", "/v2/cudasharedmemory/region/sys/register",
                                 {"raw_handle": {"b64": handle}, "device_id": 0, "byte_size": 64})
        self.assertEqual(status, 400, body)
        self.assertIn("already", body["error"])
        code, _ = grpc_outcome(lambda: stub_of(G).CudaSharedMemoryRegister(
            pb.CudaSharedMemoryRegisterRequest(name="sys", raw_handle=bytes(64), device_id=0,
                                               byte_size=64), timeout=30))
        self.assertEqual(code, grpc.StatusCode.ALREADY_EXISTS)

    def test_unregister_all_of_one_kind(self):
        a, b = self.make(4096), self.make(4096)
        for i in range(5):
            self.assertEqual(http_register(G, "r%d" % i, (a if i % 2 else b).key, 16 + i), (200, None))
        self.assertEqual(len(http_status(G)[1]), 5)
        self.assertEqual(http_unregister(G), (200, None))
        self.assertEqual(http_status(G), (200, []))
        self.assertEqual(len(grpc_status(G)[1].regions), 0)
        # The names are free again.
        self.assertEqual(grpc_register(G, "r0", a.key, 16)[0], "ok")


# ---- 2. bad registrations ----------------------------------------------------------------

class BadRegisterTest(ObjectsMixin, unittest.TestCase):

    def assertHttpRefused(self, outcome, status, *words):
        self.assertEqual(outcome[0], status, outcome)
        for word in words:
            self.assertIn(word, outcome[1]["error"])

    def assertGrpcRefused(self, outcome, code, *words):
        self.assertEqual(outcome[0], code, outcome)
        for word in words:
            self.assertIn(word, outcome[1])

    def assertNothingRegistered(self):
        self.assertEqual(http_status(G), (200, []))

    def test_missing_members(self):
        obj = self.make(4096)
        path = "/v2/systemsharedmemory/region/m/register"
        self.assertHttpRefused(http_json(G, "POST", path, {"byte_size": 64}), 400, "key")
        self.assertHttpRefused(http_json(G, "POST", path, {"key": obj.key}), 400, "byte_size")
        self.assertHttpRefused(http_json(G, "POST", path, {"key": 5, "byte_size": 64}), 400, "key")
        self.assertHttpRefused(http_json(G, "POST", path, {"key": obj.key, "byte_size": -1}), 400, "byte_size")
        self.assertHttpRefused(http_json(G, "POST", path, []), 400)
        self.assertNothingRegistered()

    def test_key_outside_the_allowlist(self):
        other = self.make(4096, prefix="infergate_x2e_%d_" % PID)  # exists, but not allowed
        self.assertHttpRefused(http_register(G, "x", other.key, 64), 400, "allowed", other.key)
        self.assertGrpcRefused(grpc_register(G, "x", other.key, 64), grpc.StatusCode.INVALID_ARGUMENT,
                               "allowed")
        # The prefix is compared on the object name, not as a substring elsewhere.
        self.assertHttpRefused(http_register(G, "x", "/dev" + other.key, 64), 400)
        self.assertNothingRegistered()

    def test_triton_reserved_and_malformed_keys(self):
        for key in ("/triton_python_backend_shm_region_1", "triton_python_backend_shm_region",
                    "//triton_python_backend_shm_region_x"):
            self.assertHttpRefused(http_register(G, "t", key, 64), 400, "triton_python_backend_shm_region")
            self.assertGrpcRefused(grpc_register(G, "t", key, 64), grpc.StatusCode.INVALID_ARGUMENT,
                                   "triton_python_backend_shm_region")
        for key in ("/", "///", ""):
            self.assertHttpRefused(http_register(G, "t", key, 64), 400)
            self.assertGrpcRefused(grpc_register(G, "t", key, 64), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertHttpRefused(http_register(G, "t", "/%sa/b" % PREFIX, 64), 400)
        self.assertNothingRegistered()

    def test_missing_object(self):
        key = "/%smissing" % PREFIX
        self.assertHttpRefused(http_register(G, "gone", key, 64), 400, key)
        self.assertGrpcRefused(grpc_register(G, "gone", key, 64), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertFalse(os.path.exists("/dev/shm" + key), "the gateway created the object")
        self.assertNothingRegistered()

    def test_range_past_the_object(self):
        obj = self.make(4096)
        self.assertHttpRefused(http_register(G, "big", obj.key, 4097), 400)
        self.assertHttpRefused(http_register(G, "big", obj.key, 4000, offset=97), 400)
        self.assertHttpRefused(http_register(G, "big", obj.key, 1, offset=4096), 400)
        self.assertGrpcRefused(grpc_register(G, "big", obj.key, 4000, offset=97),
                               grpc.StatusCode.INVALID_ARGUMENT)
        self.assertNothingRegistered()
        # Exactly the object's end is fine, at an offset that is not page-aligned too.
        self.assertEqual(http_register(G, "edge", obj.key, 4000, offset=96), (200, None))
        self.assertEqual(grpc_register(G, "edge2", obj.key, 1, offset=4095)[0], "ok")

    def test_offset_plus_size_overflow(self):
        obj = self.make(4096)
        top = 2 ** 64 - 1
        self.assertGrpcRefused(grpc_register(G, "ov", obj.key, 16, offset=top),
                               grpc.StatusCode.INVALID_ARGUMENT)
        self.assertGrpcRefused(grpc_register(G, "ov", obj.key, top, offset=1),
                               grpc.StatusCode.INVALID_ARGUMENT)
        self.assertHttpRefused(http_register(G, "ov", obj.key, 16, offset=top), 400)
        self.assertHttpRefused(http_register(G, "ov", obj.key, top, offset=top), 400)
        # Past uint64 in JSON: not a non-negative 64-bit integer.
        self.assertHttpRefused(http_json(G, "POST", "/v2/systemsharedmemory/region/ov/register",
                                         '{"key":"%s","offset":18446744073709551616,"byte_size":16}'
                                         % obj.key), 400)
        self.assertNothingRegistered()

    def test_byte_size_zero(self):
        obj = self.make(4096)
        self.assertHttpRefused(http_register(G, "z", obj.key, 0), 400, "byte_size")
        self.assertGrpcRefused(grpc_register(G, "z", obj.key, 0), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertNothingRegistered()

    def test_duplicate_name(self):
        a, b = self.make(4096), self.make(4096)
        self.assertEqual(http_register(G, "dup", a.key, 64), (200, None))
        self.assertHttpRefused(http_register(G, "dup", b.key, 128), 400, "dup")
        self.assertGrpcRefused(grpc_register(G, "dup", b.key, 128), grpc.StatusCode.ALREADY_EXISTS, "dup")
        # The first registration stands.
        self.assertEqual(http_status(G), (200, [{"name": "dup", "key": a.key, "offset": 0, "byte_size": 64}]))

    def test_register_without_region_name(self):
        obj = self.make(4096)
        body = {"key": obj.key, "byte_size": 64}
        self.assertHttpRefused(http_json(G, "POST", "/v2/systemsharedmemory/register", body), 400,
                               "'region name' is necessary")
        self.assertHttpRefused(http_json(G, "POST", "/v2/cudasharedmemory/register",
                                         {"raw_handle": {"b64": ""}, "device_id": 0, "byte_size": 64}),
                               400, "'region name' is necessary")
        self.assertGrpcRefused(grpc_register(G, "", obj.key, 64), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertNothingRegistered()

    def test_cuda_register(self):
        handle64 = base64.b64encode(bytes(64)).decode()
        handle10 = base64.b64encode(bytes(10)).decode()
        path = "/v2/cudasharedmemory/region/c/register"
        self.assertHttpRefused(http_json(G, "POST", path, {"raw_handle": {"b64": handle10},
                                                           "device_id": 0, "byte_size": 64}), 400, "10")
        self.assertGrpcRefused(grpc_outcome(lambda: stub_of(G).CudaSharedMemoryRegister(
            pb.CudaSharedMemoryRegisterRequest(name="c", raw_handle=bytes(10), device_id=0,
                                               byte_size=64), timeout=30)),
            grpc.StatusCode.INVALID_ARGUMENT)
        self.assertHttpRefused(http_json(G, "POST", path, {"raw_handle": {"b64": "!!not base64"},
                                                           "device_id": 0, "byte_size": 64}), 400)
        self.assertHttpRefused(http_json(G, "POST", path, {"device_id": 0, "byte_size": 64}), 400,
                               "raw_handle")
        # Checked before the GPU is asked, so the same answer with or without one.
        self.assertHttpRefused(http_json(G, "POST", path, {"raw_handle": {"b64": handle64},
                                                           "device_id": 0, "byte_size": 0}), 400,
                               "byte_size")
        if NO_GPU:
            self.assertHttpRefused(http_json(G, "POST", path, {"raw_handle": {"b64": handle64},
                                                               "device_id": 0, "byte_size": 64}), 501)
            self.assertGrpcRefused(grpc_outcome(lambda: stub_of(G).CudaSharedMemoryRegister(
                pb.CudaSharedMemoryRegisterRequest(name="c", raw_handle=bytes(64), device_id=0,
                                                   byte_size=64), timeout=30)),
                grpc.StatusCode.UNIMPLEMENTED)
        self.assertEqual(http_status(G, kind="cuda"), (200, []))

    def test_disabled_gateway(self):
        obj = self.make(4096)
        outcome = http_register(G_OFF, "off", obj.key, 64)
        self.assertHttpRefused(outcome, 501, "shm.enabled")
        self.assertHttpRefused(http_unregister(G_OFF, "off"), 501, "shm.enabled")
        self.assertHttpRefused(http_unregister(G_OFF), 501)
        self.assertHttpRefused(http_unregister(G_OFF, kind="cuda"), 501)
        self.assertHttpRefused(http_json(G_OFF, "POST", "/v2/cudasharedmemory/region/c/register",
                                         {"raw_handle": {"b64": base64.b64encode(bytes(64)).decode()},
                                          "device_id": 0, "byte_size": 64}), 501)
        self.assertEqual(http_status(G_OFF), (200, []))
        self.assertEqual(http_status(G_OFF, kind="cuda"), (200, []))
        self.assertGrpcRefused(grpc_register(G_OFF, "off", obj.key, 64), grpc.StatusCode.UNIMPLEMENTED,
                               "shm.enabled")
        self.assertGrpcRefused(grpc_unregister(G_OFF, "off"), grpc.StatusCode.UNIMPLEMENTED)
        code, resp = grpc_status(G_OFF)
        self.assertEqual((code, len(resp.regions)), ("ok", 0))

    def test_listener_restriction(self):
        obj = self.make(4096)
        self.assertHttpRefused(http_register(G_GRPC_ONLY, "l", obj.key, 64), 403, "HTTP", "shm.listeners")
        self.assertEqual(http_status(G_GRPC_ONLY), (200, []))
        self.assertEqual(grpc_register(G_GRPC_ONLY, "l", obj.key, 64)[0], "ok")
        self.assertEqual(http_status(G_GRPC_ONLY),
                         (200, [{"name": "l", "key": obj.key, "offset": 0, "byte_size": 64}]))
        self.assertHttpRefused(http_unregister(G_GRPC_ONLY, "l"), 403)
        self.assertHttpRefused(http_unregister(G_GRPC_ONLY), 403)
        self.assertEqual(len(grpc_status(G_GRPC_ONLY)[1].regions), 1)
        # The listener list is about changing the table: the region is usable from HTTP.
        values = i32([11, 22, 33, 44])
        obj.write(0, values.tobytes())
        status, body = http_infer(G_GRPC_ONLY, "identity_int32",
                                  [In("INPUT0", "INT32", [1, 4], shm=("l", 16, None))])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["data"], [11, 22, 33, 44])
        self.assertEqual(grpc_unregister(G_GRPC_ONLY, "l")[0], "ok")
        self.assertEqual(http_status(G_GRPC_ONLY), (200, []))

    def test_max_regions(self):
        obj = self.make(4096)
        try:
            for i in range(3):
                self.assertEqual(grpc_register(G_GRPC_ONLY, "m%d" % i, obj.key, 64)[0], "ok")
            self.assertGrpcRefused(grpc_register(G_GRPC_ONLY, "m3", obj.key, 64),
                                   grpc.StatusCode.RESOURCE_EXHAUSTED, "max_regions")
            self.assertEqual(sorted(grpc_status(G_GRPC_ONLY)[1].regions), ["m0", "m1", "m2"])
            self.assertEqual(grpc_unregister(G_GRPC_ONLY, "m1")[0], "ok")
            self.assertEqual(grpc_register(G_GRPC_ONLY, "m3", obj.key, 64)[0], "ok")
        finally:
            self.assertEqual(grpc_unregister(G_GRPC_ONLY)[0], "ok")
        self.assertEqual(len(grpc_status(G_GRPC_ONLY)[1].regions), 0)


# ---- 3. inference with tensors in regions ------------------------------------------------

class InferTest(ObjectsMixin, unittest.TestCase):
    """Regions: "in" = object IN at offset 96, 4096 bytes; "out" = object OUT at offset 4100
    (not page-aligned), 8000 bytes."""

    IN_BASE, OUT_BASE = 96, 4100

    def setUp(self):
        super().setUp()
        self.inobj, self.outobj = self.make(8192), self.make(12288)
        self.assertEqual(http_register(G, "in", self.inobj.key, 4096, offset=self.IN_BASE), (200, None))
        self.assertEqual(grpc_register(G, "out", self.outobj.key, 8000, offset=self.OUT_BASE)[0], "ok")

    def put(self, offset, array):
        self.inobj.write(self.IN_BASE + offset, array.tobytes())

    def taken(self, offset, size):
        """The bytes an output left at region "out" offset `offset`, checking the bytes on
        either side of it are still the sentinel."""
        base = self.OUT_BASE + offset
        self.assertEqual(self.outobj.read(base - 8, 8), bytes([SENTINEL]) * 8, "written before the output")
        self.assertEqual(self.outobj.read(base + size, 8), bytes([SENTINEL]) * 8, "written past the output")
        return self.outobj.read(base, size)

    def test_identity_in_and_out_http_json(self):
        for n, path in enumerate(PATHS):
            with self.subTest(path=path):
                self.outobj.fill()
                values = rand_i32(37, seed=n)
                self.put(40, values)
                status, body = http_infer(G, "identity_int32",
                                          [In("INPUT0", "INT32", [1, 37], shm=("in", 148, 40))],
                                          [Out("OUTPUT0", shm=("out", 148, 72))], path=path)
                self.assertEqual(status, 200, body)
                self.assertEqual(body["outputs"], [{"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 37]}])
                self.assertEqual(self.taken(72, 148), values.tobytes())

    def test_identity_in_and_out_grpc(self):
        for n, path in enumerate(PATHS):
            with self.subTest(path=path):
                self.outobj.fill()
                values = rand_i32(37, seed=10 + n)
                self.put(40, values)
                outcome = grpc_infer(G, grpc_infer_request(
                    "identity_int32", [In("INPUT0", "INT32", [1, 37], shm=("in", 148, 40))],
                    [Out("OUTPUT0", shm=("out", 148, 72))], request_id="id-%s" % path), path)
                self.assertEqual(outcome[0], "ok", outcome)
                resp = outcome[1]
                self.assertEqual((resp.model_name, resp.id), ("identity_int32", "id-%s" % path))
                self.assertEqual(len(resp.outputs), 1)
                out = resp.outputs[0]
                self.assertEqual((out.name, out.datatype, list(out.shape)), ("OUTPUT0", "INT32", [1, 37]))
                self.assertFalse([k for k in out.parameters if k.startswith("shared_memory")])
                self.assertEqual(list(resp.raw_output_contents), [b""])
                self.assertEqual(self.taken(72, 148), values.tobytes())

    def test_larger_fp32_output_space_bigger_than_needed(self):
        values = np.random.default_rng(5).standard_normal(1000).astype("<f4")
        self.put(0, values)
        for path in PATHS:
            for protocol in ("http", "grpc"):
                with self.subTest(path=path, protocol=protocol):
                    self.outobj.fill()
                    inputs = [In("INPUT0", "FP32", [1, 1000], shm=("in", 4000, None))]
                    outputs = [Out("OUTPUT0", shm=("out", 7000, 8))]  # room to spare: fine
                    if protocol == "http":
                        status, body = http_infer(G, "identity_fp32", inputs, outputs, path=path)
                        self.assertEqual(status, 200, body)
                        self.assertNotIn("data", body["outputs"][0])
                    else:
                        outcome = grpc_infer(G, grpc_infer_request("identity_fp32", inputs, outputs), path)
                        self.assertEqual(outcome[0], "ok", outcome)
                    self.assertEqual(self.taken(8, 4000), values.tobytes())
                    # Nothing written past the output in the space given.
                    self.assertEqual(self.outobj.read(self.OUT_BASE + 4008, 3000), bytes([SENTINEL]) * 3000)

    def test_input_in_shm_output_inline_and_the_reverse(self):
        values = i32([5, -6, 7, 2 ** 31 - 1])
        self.put(16, values)
        for path in PATHS:
            with self.subTest(path=path, case="input in shm"):
                status, body = http_infer(G, "identity_int32",
                                          [In("INPUT0", "INT32", [1, 4], shm=("in", 16, 16))], path=path)
                self.assertEqual(status, 200, body)
                self.assertEqual(body["outputs"][0]["data"], values.tolist())
                outcome = grpc_infer(G, grpc_infer_request(
                    "identity_int32", [In("INPUT0", "INT32", [1, 4], shm=("in", 16, 16))]), path)
                self.assertEqual(outcome[0], "ok", outcome)
                self.assertEqual(outcome[1].raw_output_contents[0], values.tobytes())
            with self.subTest(path=path, case="output in shm"):
                self.outobj.fill()
                status, body = http_infer(G, "identity_int32", [In("INPUT0", "INT32", [1, 4], values)],
                                          [Out("OUTPUT0", shm=("out", 16, 0))], path=path)
                self.assertEqual(status, 200, body)
                self.assertEqual(body["outputs"], [{"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 4]}])
                self.assertEqual(self.outobj.read(self.OUT_BASE, 16), values.tobytes())
                self.outobj.fill()
                outcome = grpc_infer(G, grpc_infer_request(
                    "identity_int32", [In("INPUT0", "INT32", [1, 4], values)],
                    [Out("OUTPUT0", shm=("out", 16, 0))]), path)
                self.assertEqual(outcome[0], "ok", outcome)
                self.assertEqual(list(outcome[1].raw_output_contents), [b""])
                self.assertEqual(self.outobj.read(self.OUT_BASE, 16), values.tobytes())

    def test_simple_one_input_and_one_output_in_shm_http_json(self):
        a, b = rand_i32(16, 1) // 4, rand_i32(16, 2) // 4
        self.put(256, b)
        for path in PATHS:
            with self.subTest(path=path):
                self.outobj.fill()
                status, body = http_infer(
                    G, "simple",
                    [In("INPUT0", "INT32", [1, 16], a), In("INPUT1", "INT32", [1, 16], shm=("in", 64, 256))],
                    [Out("OUTPUT0", shm=("out", 64, 128)), Out("OUTPUT1")], path=path)
                self.assertEqual(status, 200, body)
                outs = {o["name"]: o for o in body["outputs"]}
                self.assertEqual(outs["OUTPUT0"], {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16]})
                self.assertEqual(outs["OUTPUT1"]["data"], (a - b).tolist())
                self.assertEqual(self.taken(128, 64), (a + b).astype("<i4").tobytes())

    def test_simple_one_input_and_one_output_in_shm_grpc(self):
        a, b = rand_i32(16, 3) // 4, rand_i32(16, 4) // 4
        self.put(512, a)
        for path in PATHS:
            with self.subTest(path=path):
                self.outobj.fill()
                # The shm input listed first: it takes no raw_input_contents slot, so the one
                # raw entry is INPUT1's.
                req = grpc_infer_request(
                    "simple",
                    [In("INPUT0", "INT32", [1, 16], shm=("in", 64, 512)), In("INPUT1", "INT32", [1, 16], b)],
                    [Out("OUTPUT0"), Out("OUTPUT1", shm=("out", 64, 1000))])
                self.assertEqual(len(req.raw_input_contents), 1)
                outcome = grpc_infer(G, req, path)
                self.assertEqual(outcome[0], "ok", outcome)
                outs = grpc_outputs(outcome[1])
                self.assertEqual(set(outs), {"OUTPUT0", "OUTPUT1"})
                self.assertEqual(outs["OUTPUT0"][1], (a + b).astype("<i4").tobytes())
                self.assertEqual(outs["OUTPUT1"][1], b"")
                self.assertEqual(list(outs["OUTPUT1"][0].shape), [1, 16])
                self.assertEqual(self.taken(1000, 64), (a - b).astype("<i4").tobytes())

    def test_simple_with_binary_tensors_over_http(self):
        a, b = rand_i32(16, 6) // 4, rand_i32(16, 7) // 4
        self.put(1024, b)
        header = {"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64}},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "parameters": shm_params(("in", 64, 1024))}],
            "outputs": [{"name": "OUTPUT0", "parameters": shm_params(("out", 64, 2048))},
                        {"name": "OUTPUT1", "parameters": {"binary_data": True}}]}
        js = json.dumps(header).encode()
        for path in PATHS:
            with self.subTest(path=path):
                self.outobj.fill()
                hdrs = {"Inference-Header-Content-Length": str(len(js)), **headers_of(path)}
                status, rh, data = G.request("POST", "/v2/models/simple/infer", js + a.tobytes(), hdrs)
                self.assertEqual(status, 200, data)
                n = int(rh["inference-header-content-length"])
                answer = json.loads(data[:n])
                outs = {o["name"]: o for o in answer["outputs"]}
                self.assertEqual(outs["OUTPUT0"], {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16]})
                self.assertEqual(outs["OUTPUT1"]["parameters"], {"binary_data_size": 64})
                self.assertEqual(data[n:], (a - b).astype("<i4").tobytes())
                self.assertEqual(self.taken(2048, 64), (a + b).astype("<i4").tobytes())

    def test_output_overlapping_its_input_in_one_region(self):
        values = rand_i32(8, 9)
        for path in PATHS:
            with self.subTest(path=path):
                self.put(0, values)
                self.inobj.write(self.IN_BASE + 32, bytes([SENTINEL]) * 8)
                status, body = http_infer(G, "identity_int32",
                                          [In("INPUT0", "INT32", [1, 8], shm=("in", 32, 0))],
                                          [Out("OUTPUT0", shm=("in", 32, 4))], path=path)
                self.assertEqual(status, 200, body)
                self.assertEqual(self.inobj.read(self.IN_BASE + 4, 32), values.tobytes())


# ---- 4. bad references -------------------------------------------------------------------

class BadReferenceTest(ObjectsMixin, unittest.TestCase):
    """Region "r": 64 bytes of a 4096-byte object; [1,4] INT32 tensors (16 bytes)."""

    def setUp(self):
        super().setUp()
        self.obj = self.make(4096)
        self.assertEqual(http_register(G, "r", self.obj.key, 64), (200, None))
        self.obj.write(0, i32([1, 2, 3, 4]).tobytes())

    CASES = [
        # (label, inputs, outputs, http status, grpc code, words in the message)
        ("unknown input region", [In("INPUT0", "INT32", [1, 4], shm=("nope", 16, None))], [],
         404, grpc.StatusCode.NOT_FOUND, ["Unable to find shared memory region: 'nope'"]),
        ("unknown output region", [In("INPUT0", "INT32", [1, 4], i32([1, 2, 3, 4]))],
         [Out("OUTPUT0", shm=("nope", 16, None))],
         404, grpc.StatusCode.NOT_FOUND, ["Unable to find shared memory region: 'nope'"]),
        ("input offset past the region", [In("INPUT0", "INT32", [1, 4], shm=("r", 16, 64))], [],
         400, grpc.StatusCode.INVALID_ARGUMENT, ["Invalid offset", "'r'"]),
        ("input offset + size past the region", [In("INPUT0", "INT32", [1, 4], shm=("r", 16, 56))], [],
         400, grpc.StatusCode.INVALID_ARGUMENT, ["Invalid offset + byte size", "'r'"]),
        ("output offset past the region", [In("INPUT0", "INT32", [1, 4], i32([1, 2, 3, 4]))],
         [Out("OUTPUT0", shm=("r", 16, 100))],
         400, grpc.StatusCode.INVALID_ARGUMENT, ["Invalid offset", "'r'"]),
        ("output offset + size past the region", [In("INPUT0", "INT32", [1, 4], i32([1, 2, 3, 4]))],
         [Out("OUTPUT0", shm=("r", 20, 48))],
         400, grpc.StatusCode.INVALID_ARGUMENT, ["Invalid offset + byte size"]),
        ("input size not the tensor's", [In("INPUT0", "INT32", [1, 4], shm=("r", 12, None))], [],
         400, grpc.StatusCode.INVALID_ARGUMENT, ["16", "12"]),
        ("output space too small", [In("INPUT0", "INT32", [1, 4], i32([1, 2, 3, 4]))],
         [Out("OUTPUT0", shm=("r", 8, 32))],
         500, grpc.StatusCode.INTERNAL, ["should be at least 16 bytes", "OUTPUT0"]),
    ]

    def test_every_bad_reference_on_every_path(self):
        for label, inputs, outputs, status, code, words in self.CASES:
            for path in PATHS:
                with self.subTest(case=label, path=path, protocol="http"):
                    self.obj.write(16, bytes([SENTINEL]) * 48)
                    got_status, body = http_infer(G, "identity_int32", inputs, outputs, path=path)
                    self.assertEqual(got_status, status, body)
                    for word in words:
                        self.assertIn(word, body["error"])
                    self.assertEqual(self.obj.read(16, 48), bytes([SENTINEL]) * 48, "region written")
                    identity_inline_ok(self, G, path, "http")
                with self.subTest(case=label, path=path, protocol="grpc"):
                    got = grpc_infer(G, grpc_infer_request("identity_int32", inputs, outputs), path)
                    self.assertEqual(got[0], code, got)
                    for word in words:
                        self.assertIn(word, got[1])
                    self.assertEqual(self.obj.read(16, 48), bytes([SENTINEL]) * 48, "region written")
                    identity_inline_ok(self, G, path, "grpc")

    def test_http_reference_shape_errors(self):
        base = {"name": "INPUT0", "shape": [1, 4], "datatype": "INT32"}
        bodies = [
            # shm and data both given
            {"inputs": [{**base, "data": [1, 2, 3, 4], "parameters": shm_params(("r", 16, None))}]},
            # offset without a region
            {"inputs": [{**base, "parameters": {"shared_memory_byte_size": 16, "shared_memory_offset": 0}}]},
            # no byte size: 0, which is not the tensor's
            {"inputs": [{**base, "parameters": {"shared_memory_region": "r"}}]},
        ]
        for path in PATHS:
            for body in bodies:
                with self.subTest(path=path, body=body):
                    status, answer = http_json(G, "POST", "/v2/models/identity_int32/infer", body,
                                               headers_of(path))
                    self.assertEqual(status, 400, answer)
            identity_inline_ok(self, G, path, "http")

    def test_grpc_reference_parameter_types(self):
        for path in PATHS:
            with self.subTest(path=path, case="uint64 byte size"):
                req = grpc_infer_request("identity_int32", [In("INPUT0", "INT32", [1, 4], shm=("r", 16, None))])
                req.inputs[0].parameters["shared_memory_byte_size"].uint64_param = 16
                self.assertEqual(grpc_infer(G, req, path)[0], grpc.StatusCode.INVALID_ARGUMENT)
            with self.subTest(path=path, case="region without byte size"):
                req = grpc_infer_request("identity_int32", [In("INPUT0", "INT32", [1, 4], shm=("r", 16, None))])
                del req.inputs[0].parameters["shared_memory_byte_size"]
                self.assertEqual(grpc_infer(G, req, path)[0], grpc.StatusCode.INVALID_ARGUMENT)
            with self.subTest(path=path, case="shm and contents"):
                req = grpc_infer_request("identity_int32", [In("INPUT0", "INT32", [1, 4], shm=("r", 16, None))])
                req.inputs[0].contents.int_contents.extend([1, 2, 3, 4])
                self.assertEqual(grpc_infer(G, req, path)[0], grpc.StatusCode.INVALID_ARGUMENT)
            identity_inline_ok(self, G, path, "grpc")

    def test_reference_on_the_disabled_gateway(self):
        inputs = [In("INPUT0", "INT32", [1, 4], shm=("r", 16, None))]
        status, body = http_infer(G_OFF, "identity_int32", inputs)
        self.assertEqual(status, 501, body)
        self.assertIn("shm.enabled", body["error"])
        got = grpc_infer(G_OFF, grpc_infer_request("identity_int32", inputs))
        self.assertEqual(got[0], grpc.StatusCode.UNIMPLEMENTED, got)
        self.assertIn("shm.enabled", got[1])
        got = grpc_infer(G_OFF, grpc_infer_request("identity_int32", [In("INPUT0", "INT32", [1, 4], i32([1, 2, 3, 4]))],
                                                   [Out("OUTPUT0", shm=("r", 16, None))]))
        self.assertEqual(got[0], grpc.StatusCode.UNIMPLEMENTED, got)
        identity_inline_ok(self, G_OFF, "local", "http")


# ---- 5. unregister while a request is in flight ------------------------------------------

class InFlightTest(ObjectsMixin, unittest.TestCase):

    SLEEP_MS = 1200

    def run_one(self, path, protocol):
        in_obj, out_obj, new_obj = self.make(4096), self.make(4096), self.make(4096)
        in_obj.write(8, i32([self.SLEEP_MS]).tobytes())
        self.assertEqual(http_register(G, "fl_in", in_obj.key, 64), (200, None))
        self.assertEqual(http_register(G, "fl_out", out_obj.key, 64), (200, None))
        inputs = [In("INPUT0", "INT32", [1], shm=("fl_in", 4, 8))]
        outputs = [Out("OUTPUT0", shm=("fl_out", 4, 20))]
        result = {}

        def call():
            if protocol == "http":
                result["outcome"] = http_infer(G, "sleep", inputs, outputs, path=path)
            else:
                result["outcome"] = grpc_infer(G, grpc_infer_request("sleep", inputs, outputs), path)

        thread = threading.Thread(target=call, daemon=True)
        started = time.monotonic()
        thread.start()
        time.sleep(0.4)
        # Gone from the table while the request runs; the name taken by another object. (The
        # input's bytes are left alone: as in Triton, the local path reads them where they
        # lie until the model has run, so a client changing them meanwhile changes the answer.)
        self.assertEqual(http_unregister(G, "fl_in"), (200, None))
        self.assertEqual(grpc_unregister(G, "fl_out")[0], "ok")
        self.assertEqual(http_status(G, "fl_in")[0], 404)
        self.assertEqual(http_register(G, "fl_out", new_obj.key, 64), (200, None))
        thread.join(timeout=30)
        self.assertFalse(thread.is_alive())
        self.assertGreaterEqual(time.monotonic() - started, self.SLEEP_MS / 1000 - 0.05,
                                "the request did not run for its sleep")
        outcome = result["outcome"]
        if protocol == "http":
            self.assertEqual(outcome[0], 200, outcome)
            self.assertEqual(outcome[1]["outputs"], [{"name": "OUTPUT0", "datatype": "INT32", "shape": [1]}])
        else:
            self.assertEqual(outcome[0], "ok", outcome)
            self.assertEqual(list(outcome[1].raw_output_contents), [b""])
        # Written into the region the request named when it came (still mapped), not into
        # the object now registered under that name.
        self.assertEqual(out_obj.read(20, 4), i32([self.SLEEP_MS]).tobytes())
        self.assertEqual(out_obj.read(16, 4) + out_obj.read(24, 4), bytes([SENTINEL]) * 8)
        self.assertEqual(new_obj.read(0, 64), bytes([SENTINEL]) * 64)
        # The unregistered input region is gone for the next request.
        status, body = http_infer(G, "sleep", [In("INPUT0", "INT32", [1], shm=("fl_in", 4, 8))], path=path)
        self.assertEqual(status, 404, body)
        self.assertIn("Unable to find shared memory region: 'fl_in'", body["error"])

    def test_unregister_while_in_flight(self):
        for path, protocol in (("local", "http"), ("grpc", "http"), ("http", "http"), ("local", "grpc"),
                               ("grpc", "grpc"), ("http", "grpc")):
            with self.subTest(path=path, protocol=protocol):
                try:
                    self.run_one(path, protocol)
                finally:
                    unregister_all(G)


# ---- 6. the remote upstream never sees a region ------------------------------------------

class UpstreamNeverSeesRegionsTest(ObjectsMixin, unittest.TestCase):

    def inference_count(self):
        status, body = http_json(U, "GET", "/v2/models/identity_int32/stats")
        self.assertEqual(status, 200, body)
        return sum(s["inference_count"] for s in body["model_stats"])

    def test_gateway_reads_and_writes_the_regions_itself(self):
        obj = self.make(4096)
        self.assertEqual(http_register(G, "blind", obj.key, 4096), (200, None))
        before = self.inference_count()
        values = rand_i32(10, 42)
        obj.write(0, values.tobytes())
        inputs = [In("INPUT0", "INT32", [1, 10], shm=("blind", 40, 0))]
        outputs = [Out("OUTPUT0", shm=("blind", 40, 1000))]
        for path in ("grpc", "http"):
            status, body = http_infer(G, "identity_int32", inputs, outputs, path=path)
            self.assertEqual(status, 200, body)
            self.assertEqual(obj.read(1000, 40), values.tobytes())
            obj.write(1000, bytes(40))
            outcome = grpc_infer(G, grpc_infer_request("identity_int32", inputs, outputs), path)
            self.assertEqual(outcome[0], "ok", outcome)
            self.assertEqual(obj.read(1000, 40), values.tobytes())
            obj.write(1000, bytes(40))
        self.assertEqual(self.inference_count(), before + 4)
        # U (client shm off) was never asked to register or use a region.
        self.assertEqual(http_status(U), (200, []))
        self.assertEqual(http_status(U, kind="cuda"), (200, []))
        code, resp = grpc_status(U)
        self.assertEqual((code, len(resp.regions)), ("ok", 0))


# ---- 7. ModelStreamInfer -----------------------------------------------------------------

class StreamTest(ObjectsMixin, unittest.TestCase):

    def setUp(self):
        super().setUp()
        self.obj = self.make(4096)
        self.assertEqual(grpc_register(G, "st", self.obj.key, 4096)[0], "ok")

    def stream(self, requests, path):
        return list(stub_of(G).ModelStreamInfer(iter(requests), metadata=metadata_of(path), timeout=30))

    def test_stream_with_regions(self):
        # Toward gRPC the messages naming regions go as ModelInfer calls of their own (the
        # stream leg relays messages untouched); the inline one goes on the leg.
        for n, path in enumerate(("local", "http", "grpc")):
            with self.subTest(path=path):
                self.obj.fill()
                a, b = rand_i32(6, 20 + n), rand_i32(9, 30 + n)
                self.obj.write(0, a.tobytes())
                self.obj.write(100, b.tobytes())
                requests = [
                    grpc_infer_request("identity_int32", [In("INPUT0", "INT32", [1, 6], shm=("st", 24, 0))],
                                       [Out("OUTPUT0", shm=("st", 24, 2000))], request_id="a"),
                    grpc_infer_request("identity_int32", [In("INPUT0", "INT32", [1, 9], shm=("st", 36, 100))],
                                       [Out("OUTPUT0", shm=("st", 36, 3000))], request_id="b"),
                    grpc_infer_request("identity_int32", [In("INPUT0", "INT32", [1, 2], i32([3, 4]))],
                                       request_id="c"),
                ]
                responses = self.stream(requests, path)
                self.assertEqual([r.error_message for r in responses], ["", "", ""])
                by_id = {r.infer_response.id: r.infer_response for r in responses}
                self.assertEqual(set(by_id), {"a", "b", "c"})
                for rid, shape in (("a", [1, 6]), ("b", [1, 9])):
                    out = by_id[rid].outputs[0]
                    self.assertEqual((out.name, list(out.shape)), ("OUTPUT0", shape))
                    self.assertEqual(list(by_id[rid].raw_output_contents), [b""])
                self.assertEqual(by_id["c"].raw_output_contents[0], i32([3, 4]).tobytes())
                self.assertEqual(self.obj.read(2000, 24), a.tobytes())
                self.assertEqual(self.obj.read(3000, 36), b.tobytes())
                self.assertEqual(self.obj.read(2024, 8), bytes([SENTINEL]) * 8)

    def test_stream_error_in_band(self):
        for path in ("local", "http", "grpc"):
            with self.subTest(path=path, case="unknown region"):
                requests = [
                    grpc_infer_request("identity_int32", [In("INPUT0", "INT32", [1, 2], shm=("nope", 8, None))],
                                       request_id="bad"),
                    grpc_infer_request("identity_int32", [In("INPUT0", "INT32", [1, 2], i32([5, 6]))],
                                       request_id="good"),
                ]
                responses = self.stream(requests, path)
                self.assertEqual(len(responses), 2)
                errors = [r for r in responses if r.error_message]
                self.assertEqual(len(errors), 1)
                self.assertIn("Unable to find shared memory region: 'nope'", errors[0].error_message)
                good = [r.infer_response for r in responses if not r.error_message]
                self.assertEqual(good[0].raw_output_contents[0], i32([5, 6]).tobytes())

    def test_stream_toward_the_grpc_upstream_never_passes_a_region_name(self):
        """The upstream answers a message naming a region without ever hearing of the region
        (its own status stays empty), and its output lands in the client's region."""
        self.obj.fill()
        self.obj.write(0, i32([1, 2]).tobytes())
        requests = [
            grpc_infer_request("identity_int32", [In("INPUT0", "INT32", [1, 2], shm=("st", 8, 0))],
                               [Out("OUTPUT0", shm=("st", 8, 500))], request_id="shm"),
            grpc_infer_request("identity_int32", [In("INPUT0", "INT32", [1, 2], i32([8, 9]))],
                               request_id="inline"),
        ]
        responses = self.stream(requests, "grpc")
        self.assertEqual([r.error_message for r in responses], ["", ""], responses)
        by_id = {r.infer_response.id: r.infer_response for r in responses}
        self.assertEqual(by_id["inline"].raw_output_contents[0], i32([8, 9]).tobytes())
        self.assertEqual(list(by_id["shm"].raw_output_contents), [b""])
        self.assertEqual(self.obj.read(500, 8), i32([1, 2]).tobytes())
        status, _, body = U.request("GET", "/v2/systemsharedmemory/status")
        self.assertEqual((status, json.loads(body)), (200, []))


if __name__ == "__main__":
    unittest.main()
