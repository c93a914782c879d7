"""The README's five-minute tour, run as written against a demo gateway.

The blocks after `<!-- tour:sh -->` and `<!-- tour:python -->` in README.md are run with
only what a reader's machine differs by put in: the demo's fixed ports become the test
gateway's (port 0), `build/release/gateway/infergate` the binary under test. The shell
block runs under `set -euo pipefail` in a scratch directory; the Python block after the
stubs its comment tells how to make. What they print is checked."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

from deploy_files import binary, path

sys.path.insert(0, path("tests", "e2e"))
from harness import Gateway  # noqa: E402

GW = None


def setUpModule():
    global GW
    with open(path("deploy", "examples", "demo.yaml")) as f:
        config = re.sub(r"127\.0\.0\.1:800[012]", "127.0.0.1:0", f.read())
    GW = Gateway(config=config).start()


def tearDownModule():
    code = GW.stop()
    if code != 0 or GW.sanitizer_reports():
        raise AssertionError("the demo gateway exited %d:\n%s" % (code, "".join(GW.stderr_lines)))


def tour_block(kind):
    with open(path("README.md")) as f:
        text = f.read()
    m = re.search(r"<!-- tour:%s -->\n```%s\n(.*?)\n```" % (kind, kind), text, re.S)
    if not m:
        raise AssertionError("README.md has no <!-- tour:%s --> block" % kind)
    return m.group(1)


def localize(text):
    for port, listener in (("8000", "http"), ("8001", "grpc"), ("8002", "metrics")):
        text = text.replace("localhost:" + port, GW.address(listener))
    return text.replace("build/release/gateway/infergate", binary())


class Tour(unittest.TestCase):
    def test_the_shell_tour(self):
        script = "set -euo pipefail\n" + localize(tour_block("sh"))
        with tempfile.TemporaryDirectory(prefix="infergate-tour-") as d:
            r = subprocess.run(["bash", "-c", script], cwd=d, capture_output=True, text=True,
                               timeout=120)
        out = r.stdout
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(out.startswith("200\n"), out[:200])
        self.assertRegex(out, r'\{"name":"infergate","version":"[^"]+","extensions":\[')
        self.assertIn('"name":"simple"', out)
        self.assertIn('"name":"OUTPUT0","datatype":"INT32","shape":[1,16],'
                      '"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]', out)
        self.assertRegex(out, r"(?i)inference-header-content-length: \d+")
        self.assertIn('{"error":"tensor \'INPUT0\': shape calls for 16 elements but \'data\' '
                      'holds 1"}', out)
        self.assertRegex(out, r'infergate_requests_total\{[^}]*model="simple"')
        self.assertIn('"routes"', out)
        self.assertIn('"upstreams"', out)

    def test_the_python_grpc_tour(self):
        code = tour_block("python")
        protoc = re.search(r"^# (protoc .*?grpc_service\.proto model_config\.proto)$",
                           code.replace("\\\n#", ""), re.S | re.M)
        self.assertIsNotNone(protoc, "the block's first comment tells how to make the stubs")
        with tempfile.TemporaryDirectory(prefix="infergate-tour-") as d:
            command = protoc.group(1).replace("codecs/proto", path("codecs", "proto"))
            subprocess.run(["bash", "-c", command], cwd=d, check=True, timeout=60)
            with open(os.path.join(d, "tour.py"), "w") as f:
                f.write(localize(code))
            r = subprocess.run(["/usr/bin/python3", "tour.py"], cwd=d, capture_output=True,
                               text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "OUTPUT0 (%s)" % ", ".join(str(i) for i in range(1, 17)))


if __name__ == "__main__":
    unittest.main()
