"""Starts a real infergate process on loopback for end-to-end tests.

The gateway binds port 0 for every listener and prints one JSON line naming the bound
addresses; the harness reads it, so tests never pick ports. One process is shared by the
tests of a module (start it in setUpModule). On stop the gateway gets SIGTERM and must
exit 0 without sanitizer reports.
"""
import http.client
import json
import os
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time

DEFAULT_CONFIG = """
listeners:
  http:    {{ address: "127.0.0.1:0" }}
  grpc:    {{ address: "127.0.0.1:0" }}
  metrics: {{ address: "127.0.0.1:0" }}
workers: 2
limits:
  max_input_bytes: {max_input_bytes}
  header_timeout_ms: {header_timeout_ms}
upstreams:
  - name: demo
    protocol: builtin
routes:
  - match: {{ model: "*" }}
    upstream: demo
"""


# The head of a gateway config: every listener on a loopback port 0, two workers (a
# string.Template's text: no $ in it).
LOOPBACK_HEAD = """
listeners:
  http:    { address: "127.0.0.1:0" }
  grpc:    { address: "127.0.0.1:0" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
"""


# A builtin-only infergate, the upstream of the routing tests: $models is a YAML flow
# sequence ("[]" = every demo model), $http / $grpc the listen addresses.
BUILTIN_UPSTREAM_TEMPLATE = """
listeners:
  http:    { address: "$http" }
  grpc:    { address: "$grpc" }
  metrics: { address: "127.0.0.1:0" }
workers: 2
upstreams:
  - name: demo
    protocol: builtin
    models: $models
routes:
  - match: { model: "*" }
    upstream: demo
"""


def binary():
    path = os.environ.get("INFERGATE_BIN")
    if not path:
        raise RuntimeError("INFERGATE_BIN must name the infergate binary (ctest sets it)")
    return path


class Gateway:
    def __init__(self, config=None, config_path=None, **params):
        """`config`: the config text, written to a file of the gateway's own; or
        `config_path`: a file kept by the test (one it changes, say), read as it is."""
        values = {"max_input_bytes": 67108864, "header_timeout_ms": 10000}
        values.update(params)
        self.config_text = config if config is not None else DEFAULT_CONFIG.format(**values)
        self.config_path = config_path
        self.dir = tempfile.TemporaryDirectory(prefix="infergate-e2e-")
        self.proc = None
        self.addresses = {}
        self.stderr_lines = []

    @classmethod
    def from_template(cls, template, **values):
        """A gateway whose config is `template` with $name placeholders (string.Template)
        replaced by `values`, e.g. another process's address: endpoints: ["$u_grpc"] with
        u_grpc=upstream.address("grpc"). Not started."""
        return cls(config=string.Template(template).substitute(values))

    @classmethod
    def builtin_upstream(cls, models=None, http="127.0.0.1:0", grpc="127.0.0.1:0", extra=""):
        """An infergate serving the demo models (all, or `models`) on HTTP and gRPC; `extra`,
        more top-level config (an shm: section, say) appended as it is."""
        listed = "[" + ", ".join(models) + "]" if models else "[]"
        return cls.from_template(BUILTIN_UPSTREAM_TEMPLATE + extra, models=listed, http=http,
                                 grpc=grpc)

    def start(self, timeout=60):
        config_path = self.config_path
        if config_path is None:
            config_path = os.path.join(self.dir.name, "infergate.yaml")
            with open(config_path, "w") as f:
                f.write(self.config_text)
        self.ready_file = os.path.join(self.dir.name, "ready.json")
        self.proc = subprocess.Popen(
            [binary(), "--config", config_path, "--ready-file", self.ready_file],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()
        deadline = time.time() + timeout
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=10)
            raise RuntimeError("infergate exited before it was ready:\n" + "".join(self.stderr_lines))
        ready = json.loads(line)
        assert ready["event"] == "ready", line
        self.addresses = ready
        while not os.path.exists(self.ready_file) and time.time() < deadline:
            time.sleep(0.01)
        return self

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def address(self, listener):
        """The bound address of `listener` ("127.0.0.1:PORT"), from the ready line."""
        return self.addresses[listener]

    def port(self, listener):
        return int(self.addresses[listener].rsplit(":", 1)[1])

    def stop(self):
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._stderr_thread.join(timeout=10)
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.proc = None
        self.dir.cleanup()
        return code

    def stop_and_check(self):
        """SIGTERM; the problems found: a non-zero exit, sanitizer reports (empty: clean)."""
        code = self.stop()
        problems = self.sanitizer_reports()
        if code != 0:
            # The report from its first line (where a sanitizer says what happened), else
            # the last lines.
            lines = self.stderr_lines
            first = next((i for i, l in enumerate(lines)
                          if "ERROR: AddressSanitizer" in l or "ERROR: LeakSanitizer" in l
                          or "runtime error:" in l), max(0, len(lines) - 50))
            problems.insert(0, "exited with %d:\n%s" % (code, "".join(lines[first:first + 120])))
        return problems

    def sanitizer_reports(self):
        text = "".join(self.stderr_lines)
        return [l for l in text.splitlines()
                if "ERROR: AddressSanitizer" in l or "ERROR: LeakSanitizer" in l
                or "runtime error:" in l or "WARNING: ThreadSanitizer" in l]

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    # ---- HTTP helpers ------------------------------------------------------------
    def connection(self, listener="http", timeout=30):
        return http.client.HTTPConnection("127.0.0.1", self.port(listener), timeout=timeout)

    def request(self, method, path, body=None, headers=None, listener="http"):
        """One request on a fresh connection: (status, headers dict lower-cased, body bytes)."""
        conn = self.connection(listener)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()

    def raw(self, data, read_until_close=True, timeout=10, listener="http"):
        """Sends raw bytes on a new socket; returns everything read until the peer closes."""
        s = socket.create_connection(("127.0.0.1", self.port(listener)), timeout=timeout)
        try:
            s.sendall(data)
            return read_until_closed(s, stop_after_first=not read_until_close)
        finally:
            s.close()


def read_until_closed(s, stop_after_first=False):
    """Everything `s` receives until the peer closes it (or resets it, or its timeout
    passes); with `stop_after_first`, the first piece only."""
    chunks = []
    while True:
        try:
            chunk = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not chunk:
            break
        chunks.append(chunk)
        if stop_after_first:
            break
    return b"".join(chunks)


class Processes:
    """The processes a test module starts (in setUpModule), stopped at its tear-down in the
    reverse order (gateways before their upstreams), each checked for a clean exit."""

    def __init__(self):
        self.started = []
        self.problems = []  # of the processes stopped before the tear-down (stop())

    def start(self, label, gateway):
        gateway.label = label
        gateway.start()
        self.started.append(gateway)
        return gateway

    def stop(self, gateway):
        """Stops one now; its problems (unlabelled), kept labelled for stop_all() too."""
        problems = gateway.stop_and_check()
        self.started.remove(gateway)
        self.problems.extend("%s: %s" % (gateway.label, p) for p in problems)
        return problems

    def stop_all(self):
        """Stops the rest; every problem found (stop()'s too), labelled."""
        problems = list(self.problems)
        for gateway in reversed(self.started):
            for p in gateway.stop_and_check():
                problems.append("%s: %s" % (gateway.label, p))
        self.started.clear()
        return problems


# A small AddressSanitizer quarantine, so that a gateway's RSS measures the gateway and not
# 256 MiB of freed blocks waiting to be reused (the suites that check RSS after a load).
ASAN_SMALL_QUARANTINE = "quarantine_size_mb=8:thread_local_quarantine_size_kb=64"


class small_asan_quarantine:
    """`with small_asan_quarantine():` gateways started inside get ASAN_SMALL_QUARANTINE
    (unless ASAN_OPTIONS already sets a quarantine); the environment is restored after."""

    def __enter__(self):
        self.saved = os.environ.get("ASAN_OPTIONS")
        if "quarantine_size_mb" not in (self.saved or ""):
            os.environ["ASAN_OPTIONS"] = ((self.saved + ":") if self.saved else "") + ASAN_SMALL_QUARANTINE
        return self

    def __exit__(self, *exc):
        if self.saved is None:
            os.environ.pop("ASAN_OPTIONS", None)
        else:
            os.environ["ASAN_OPTIONS"] = self.saved
        return False


def free_port():
    """A loopback TCP port with nothing listening on it (bound once, then released)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def wait_until(predicate, timeout=30, interval=0.05):
    """Polls `predicate` until it returns a true value or `timeout` seconds pass; returns
    its last value."""
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value or time.time() >= deadline:
            return value
        time.sleep(interval)
