"""Deployment without Kubernetes: the systemd unit (deploy/systemd/) and the compose file
(deploy/compose/). The unit passes `systemd-analyze verify` (pointed at the built binary)
without a warning, reloads with SIGHUP and leaves the drain its time; the compose file
puts infergate in Triton's IPC namespace (one /dev/shm for the handoff) and its config
passes `infergate validate` and names Triton's moved gRPC port."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import yaml

from deploy_files import binary, memory_bytes, path, validate

UNIT = path("deploy", "systemd", "infergate.service")
COMPOSE = path("deploy", "compose", "docker-compose.yaml")


def unit_settings():
    """{key: [values]} of the unit's [Service] section."""
    settings, section = {}, None
    with open(UNIT) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]":
                key, _, value = line.partition("=")
                settings.setdefault(key, []).append(value)
    return settings


def analyze(unit_text):
    """systemd-analyze verify of `unit_text` as infergate.service: (exit code, output)."""
    with tempfile.TemporaryDirectory(prefix="infergate-unit-") as d:
        p = os.path.join(d, "infergate.service")
        with open(p, "w") as f:
            f.write(unit_text)
        r = subprocess.run(["systemd-analyze", "verify", p], capture_output=True, text=True,
                           timeout=60)
        return r.returncode, (r.stdout + r.stderr).strip()


class SystemdUnit(unittest.TestCase):
    def setUp(self):
        if shutil.which("systemd-analyze") is None:
            self.skipTest("systemd-analyze is not installed (Debian's systemd package)")
        with open(UNIT) as f:
            self.text = f.read().replace("/usr/local/bin/infergate", binary())

    def test_verifies_without_a_warning(self):
        code, out = analyze(self.text)
        self.assertEqual((code, out), (0, ""))

    def test_the_verification_reports_mistakes(self):
        code, out = analyze(self.text.replace("TimeoutStopSec=30", "TimeoutStopSec=30x\nBogus=1"))
        self.assertIn("Unknown key 'Bogus'", out)
        self.assertIn("Failed to parse time value", out)


class SystemdSettings(unittest.TestCase):
    def test_start_reload_and_stop(self):
        s = unit_settings()
        config = "/etc/infergate/infergate.yaml"
        self.assertEqual(s["ExecStart"], ["/usr/local/bin/infergate --config " + config])
        self.assertEqual(s["ExecStartPre"], ["/usr/local/bin/infergate validate " + config])
        self.assertEqual(s["ExecReload"], ["/bin/kill -HUP $MAINPID"])
        self.assertEqual(s["KillSignal"], ["SIGTERM"])
        # The default drain (lifecycle.drain_timeout_ms) is 10 s.
        self.assertGreater(int(s["TimeoutStopSec"][0]), 10)
        self.assertEqual(s["User"], ["infergate"])
        self.assertEqual(s["NoNewPrivileges"], ["true"])
        # A private /dev/shm would hide the handoff pool from Triton.
        self.assertNotIn("PrivateDevices", s)
        self.assertNotIn("PrivateIPC", s)


class Compose(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(COMPOSE) as f:
            cls.compose = yaml.safe_load(f)
        cls.triton = cls.compose["services"]["triton"]
        cls.gateway = cls.compose["services"]["infergate"]
        with open(path("deploy", "compose", "infergate.yaml")) as f:
            cls.config_text = f.read()
        cls.config = yaml.safe_load(cls.config_text)

    def test_the_config_validates(self):
        code, out = validate(self.config_text)
        self.assertEqual(code, 0, out)

    def test_one_dev_shm_for_the_handoff(self):
        self.assertEqual(self.triton["ipc"], "shareable")
        self.assertEqual(self.gateway["ipc"], "service:triton")
        upstream = self.config["upstreams"][0]
        self.assertIs(upstream["colocated"], True)
        self.assertGreaterEqual(memory_bytes(self.triton["shm_size"].upper().replace("GB", "G")),
                                upstream["handoff"]["pool_bytes"])
        self.assertIn("--allow-client-shm=true", self.triton["command"])
        self.assertEqual(self.triton["user"], "1000:1000", "the pool's objects are mode 0600")

    def test_the_upstream_is_tritons_moved_grpc_port(self):
        (endpoint,) = self.config["upstreams"][0]["endpoints"]
        host, port = endpoint.rsplit(":", 1)
        self.assertEqual(host, "triton")
        self.assertIn("--grpc-port=" + port, self.triton["command"])
        self.assertNotIn("ports", self.triton, "Triton is reached only through infergate")

    def test_infergate_owns_the_ports_and_keeps_metrics_local(self):
        ports = self.gateway["ports"]
        self.assertIn("8000:8000", ports)
        self.assertIn("8001:8001", ports)
        self.assertIn("127.0.0.1:8002:8002", ports)
        listen = {name: int(l["address"].rsplit(":", 1)[1])
                  for name, l in self.config["listeners"].items()}
        self.assertEqual(listen, {"http": 8000, "grpc": 8001, "metrics": 8002})

    def test_builds_the_image_and_leaves_the_drain_its_time(self):
        build = self.gateway["build"]
        self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(COMPOSE), build["context"],
                                                    build["dockerfile"])))
        grace = int(re.match(r"^(\d+)s$", self.gateway["stop_grace_period"]).group(1))
        self.assertGreater(grace, self.config["lifecycle"]["drain_timeout_ms"] / 1000)
        mount = self.gateway["volumes"][0]
        self.assertEqual(mount, "./infergate.yaml:/etc/infergate/infergate.yaml:ro")
        self.assertIs(self.config["lifecycle"]["watch_config"], True)


if __name__ == "__main__":
    unittest.main()
