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


def binary():
    path = os.environ.get("INFERGATE_BIN")
    if not path:
        raise RuntimeError("INFERGATE_BIN must name the infergate binary (ctest sets it)")
    return path


class Gateway:
    def __init__(self, config=None, **params):
        values = {"max_input_bytes": 67108864, "header_timeout_ms": 10000}
        values.update(params)
        self.config_text = config if config is not None else DEFAULT_CONFIG.format(**values)
        self.dir = tempfile.TemporaryDirectory(prefix="infergate-e2e-")
        self.proc = None
        self.addresses = {}
        self.stderr_lines = []

    def start(self, timeout=60):
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

    def sanitizer_reports(self):
        text = "".join(self.stderr_lines)
        return [l for l in text.splitlines()
                if "ERROR: AddressSanitizer" in l or "ERROR: LeakSanitizer" in l
                or "runtime error:" in l]

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

    def raw(self, data, read_until_close=True, timeout=10):
        """Sends raw bytes on a new socket; returns everything read until the peer closes."""
        s = socket.create_connection(("127.0.0.1", self.port("http")), timeout=timeout)
        try:
            s.sendall(data)
            chunks = []
            while True:
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
                if not read_until_close:
                    break
            return b"".join(chunks)
        finally:
            s.close()
