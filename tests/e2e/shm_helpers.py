"""Helpers of the client shared-memory end-to-end tests (test_shm, test_handoff): POSIX shm
objects made with multiprocessing.shared_memory (the client's side), the system
shared-memory register / status / unregister calls over HTTP and gRPC, and inference
requests whose tensors are inline or name regions.

A `path` is the value of the x-path header (HTTP) or metadata entry (gRPC) that picks a
route at the gateway under test; None or "local" sends none (its catch-all route).
"""
import itertools
import json
import os
from multiprocessing import shared_memory

import numpy as np

import grpc_stubs
from grpc_stubs import grpc_outcome, stub_of
from harness import LOOPBACK_HEAD

SENTINEL = 0xA5  # the byte a new object is filled with: bytes around an output must keep it


# ---- shared-memory objects ---------------------------------------------------------------

class ShmObject:
    """A POSIX shm object made here (the client's side): `key` is what gets registered."""

    def __init__(self, name, size, fill=SENTINEL):
        self.name = name
        self.shm = shared_memory.SharedMemory(name=self.name, create=True, size=size)
        self.size = size
        self.key = "/" + self.name
        self.fill(fill)

    def fill(self, value=SENTINEL):
        self.shm.buf[:self.size] = bytes([value]) * self.size

    def write(self, offset, data):
        data = bytes(data)
        self.shm.buf[offset:offset + len(data)] = data

    def read(self, offset, size):
        return bytes(self.shm.buf[offset:offset + size])

    def close(self):
        if self.shm is not None:
            self.shm.close()
            self.shm.unlink()
            self.shm = None


class ShmObjects:
    """The shm objects of one test module, named <prefix><n>; every name is remembered to
    check that none is left behind."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.made = []
        self._counter = itertools.count()

    def make(self, size, prefix=None, fill=SENTINEL):
        name = "%s%d" % (prefix or self.prefix, next(self._counter))
        self.made.append(name)
        return ShmObject(name, size, fill)

    def still_there(self):
        """The names made here that are in /dev/shm now."""
        return [name for name in self.made if os.path.exists(os.path.join("/dev/shm", name))]

    def remove_left(self):
        """Unlinks every object made here that is still there; their names."""
        left = self.still_there()
        for name in left:
            try:
                os.unlink(os.path.join("/dev/shm", name))
            except OSError:
                pass
        return left


class ObjectsMixin:
    """For a TestCase: the objects a test makes (self.make) closed and unlinked whatever
    happens, and every system region of self.gateway() unregistered before and after each
    test. A subclass sets `shm_objects` (a ShmObjects) and defines gateway()."""

    shm_objects = None

    def gateway(self):
        raise NotImplementedError

    def setUp(self):
        self.objects = []
        unregister_all(self.gateway())

    def tearDown(self):
        try:
            unregister_all(self.gateway())
        finally:
            for obj in self.objects:
                obj.close()

    def make(self, size, **kwargs):
        obj = self.shm_objects.make(size, **kwargs)
        self.objects.append(obj)
        return obj


def stop_processes(processes):
    """A test module's gRPC channels closed and `processes` (a harness.Processes) stopped:
    the problems found."""
    grpc_stubs.close_channels()
    return processes.stop_all()


def tear_down(processes, objects, what):
    """stop_processes(), then the objects of `objects` still in /dev/shm unlinked: every
    problem found, those objects (called `what`) among them."""
    problems = stop_processes(processes)
    left = objects.remove_left()  # clean up anyway, then fail
    if left:
        problems.append("%s left in /dev/shm: %s" % (what, left))
    return problems


# ---- the gateway under test ----------------------------------------------------------------

# A gateway with client shm on and every model on three routes, chosen by the header /
# metadata x-path: "grpc" -> u-grpc (U over gRPC), "http" -> u-http (U over HTTP), none ->
# local (builtin models in the gateway itself). $u_grpc / $u_http: U's addresses; append a
# whole shm: section (string.Template's text: no other $ in it).
THREE_PATH_GATEWAY = LOOPBACK_HEAD + """upstreams:
  - { name: u-grpc, protocol: grpc, endpoints: ["$u_grpc"], timeout_ms: 30000 }
  - { name: u-http, protocol: http, endpoints: ["$u_http"], timeout_ms: 30000 }
  - { name: local, protocol: builtin }
routes:
  - match: { model: "*", headers: { x-path: grpc } }
    upstream: u-grpc
  - match: { model: "*", headers: { x-path: http } }
    upstream: u-http
  - match: { model: "*" }
    upstream: local
"""


# ---- HTTP and gRPC calls -----------------------------------------------------------------

def headers_of(path):
    return {} if path in (None, "local") else {"x-path": path}


def metadata_of(path):
    return () if path in (None, "local") else (("x-path", path),)


def jbody(data):
    return json.loads(data) if data else None


def http_json(gw, method, path, body=None, headers=None):
    """(status, parsed JSON body or None)."""
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    status, _, data = gw.request(method, path, body=body, headers=headers)
    return status, jbody(data)


def http_register(gw, name, key, byte_size, offset=None):
    body = {"key": key, "byte_size": byte_size}
    if offset is not None:
        body["offset"] = offset
    return http_json(gw, "POST", "/v2/systemsharedmemory/region/%s/register" % name, body)


def grpc_call(gw, rpc, **fields):
    """RPC `rpc` of GRPCInferenceService with a <rpc>Request of `fields`: ("ok", response) or
    (code, details)."""
    request = getattr(grpc_stubs.load()[0], rpc + "Request")(**fields)
    return grpc_outcome(lambda: getattr(stub_of(gw), rpc)(request, timeout=30))


def grpc_register(gw, name, key, byte_size, offset=0):
    return grpc_call(gw, "SystemSharedMemoryRegister", name=name, key=key, offset=offset,
                     byte_size=byte_size)


def http_status(gw, name=None, kind="system"):
    region = "region/%s/" % name if name else ""
    return http_json(gw, "GET", "/v2/%ssharedmemory/%sstatus" % (kind, region))


def grpc_status(gw, name=""):
    return grpc_call(gw, "SystemSharedMemoryStatus", name=name)


def http_unregister(gw, name=None, kind="system"):
    region = "region/%s/" % name if name else ""
    return http_json(gw, "POST", "/v2/%ssharedmemory/%sunregister" % (kind, region))


def grpc_unregister(gw, name=""):
    return grpc_call(gw, "SystemSharedMemoryUnregister", name=name)


def unregister_all(gw):
    status, body = http_unregister(gw)
    assert status == 200, (status, body)


# ---- inference requests ------------------------------------------------------------------

class In:
    """An input: inline `values` (a numpy array), or in region `shm` = (region, byte_size,
    offset or None)."""

    def __init__(self, name, datatype, shape, values=None, shm=None):
        self.name, self.datatype, self.shape, self.values, self.shm = name, datatype, shape, values, shm


class Out:
    """A requested output: inline, or into region `shm` = (region, byte_size, offset or None)."""

    def __init__(self, name, shm=None):
        self.name, self.shm = name, shm


def shm_params(shm):
    """The HTTP parameters naming region `shm` = (region, byte_size, offset or None)."""
    region, size, offset = shm
    params = {"shared_memory_region": region, "shared_memory_byte_size": size}
    if offset is not None:
        params["shared_memory_offset"] = offset
    return params


def http_infer_body(inputs, outputs=()):
    body = {"inputs": []}
    for t in inputs:
        d = {"name": t.name, "shape": t.shape, "datatype": t.datatype}
        if t.shm:
            d["parameters"] = shm_params(t.shm)
        else:
            d["data"] = t.values.flatten().tolist()
        body["inputs"].append(d)
    if outputs:
        body["outputs"] = [{"name": o.name, "parameters": shm_params(o.shm)} if o.shm
                           else {"name": o.name} for o in outputs]
    return body


def http_infer(gw, model, inputs, outputs=(), path="local"):
    """A JSON request: (status, parsed JSON body or None)."""
    return http_json(gw, "POST", "/v2/models/%s/infer" % model, http_infer_body(inputs, outputs),
                     headers_of(path))


def set_grpc_shm(params, shm):
    """Sets the gRPC parameters naming region `shm` = (region, byte_size, offset or None)."""
    region, size, offset = shm
    params["shared_memory_region"].string_param = region
    params["shared_memory_byte_size"].int64_param = size
    if offset is not None:
        params["shared_memory_offset"].int64_param = offset


def grpc_infer_request(model, inputs, outputs=(), request_id=""):
    """A ModelInferRequest: inline inputs in raw_input_contents, in the order given."""
    pb = grpc_stubs.load()[0]
    req = pb.ModelInferRequest(model_name=model, id=request_id)
    for t in inputs:
        x = req.inputs.add()
        x.name, x.datatype = t.name, t.datatype
        x.shape.extend(t.shape)
        if t.shm:
            set_grpc_shm(x.parameters, t.shm)
        else:
            req.raw_input_contents.append(t.values.tobytes())
    for o in outputs:
        x = req.outputs.add()
        x.name = o.name
        if o.shm:
            set_grpc_shm(x.parameters, o.shm)
    return req


def grpc_infer(gw, req, path="local"):
    """ModelInfer: ("ok", response) or (code, details)."""
    return grpc_outcome(lambda: stub_of(gw).ModelInfer(req, metadata=metadata_of(path), timeout=30))


# ---- the handoff's counters and identity requests (test_handoff, test_cuda_shm) -----------

def upstream_record(gw, name):
    status, _, data = gw.request("GET", "/admin/upstreams", listener="metrics")
    assert status == 200, data
    for u in json.loads(data)["upstreams"]:
        if u["name"] == name:
            return u
    raise AssertionError("no upstream %s in %s" % (name, data))


def endpoint(gw, name):
    """The colocated (first) endpoint's admin record."""
    return upstream_record(gw, name)["endpoints"][0]


def handoff(gw, name):
    return endpoint(gw, name)["handoff"]


def datatype_of(values):
    return {np.dtype("<f4"): "FP32", np.dtype("<i4"): "INT32", np.dtype("<u2"): "UINT16",
            np.dtype("<f8"): "FP64", np.dtype("<i8"): "INT64", np.dtype("<u4"): "UINT32",
            np.dtype("int8"): "INT8"}[values.dtype]


def model_of(values):
    return "identity_" + datatype_of(values).lower()


def http_binary_infer(gw, values, path=None, name_output=True):
    """An HTTP binary-tensor request, the output asked as binary -> numpy array."""
    header = {"inputs": [{"name": "INPUT0", "shape": [1, len(values)], "datatype": datatype_of(values),
                          "parameters": {"binary_data_size": values.nbytes}}]}
    if name_output:
        header["outputs"] = [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]
    else:
        header["parameters"] = {"binary_data_output": True}
    js = json.dumps(header, separators=(",", ":")).encode()
    headers = {"Inference-Header-Content-Length": str(len(js)), **headers_of(path)}
    status, resp_headers, data = gw.request("POST", "/v2/models/%s/infer" % model_of(values),
                                            body=js + values.tobytes(), headers=headers)
    assert status == 200, (status, data[:500])
    n = int(resp_headers["inference-header-content-length"])
    answer, raw = json.loads(data[:n]), data[n:]
    out = answer["outputs"][0]
    assert (out["name"], out["shape"]) == ("OUTPUT0", [1, len(values)]), out
    assert out["parameters"]["binary_data_size"] == values.nbytes, out
    return np.frombuffer(raw, dtype=values.dtype)
