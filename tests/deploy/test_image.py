"""The container image's recipe (deploy/Dockerfile) and the one package list it shares with
scripts/setup (scripts/packages.txt).

No Docker engine runs on the test machine, so the image itself is built and smoke-tested
by scripts/image (podman; deploy/README.md has its last run). These checks keep the recipe
honest without an engine: two stages on Debian 12, packages only through scripts/setup and
the shared list, the runtime list covering every library the binary links (found with
readelf, ldd and dpkg on this machine, where scripts/setup installed the same list), a
non-root user, the HEALTHCHECK, ports and config path matching the config it ships."""
import os
import re
import subprocess
import unittest

import yaml

from deploy_files import binary, path, validate

# Sanitizer runtimes: linked by the test build only, never by the release binary.
SANITIZER_PACKAGES = {"libasan8", "libubsan1", "liblsan0", "libtsan2"}


def dockerfile_instructions():
    """(stage index, INSTRUCTION, arguments) with continuation lines joined; stage -1 for
    what comes before the first FROM."""
    with open(path("deploy", "Dockerfile")) as f:
        text = f.read()
    logical, current = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    out, stage = [], -1
    for line in logical:
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            stage += 1
        out.append((stage, word, rest.strip()))
    return out


def packages_sections():
    sections, current = {}, None
    with open(path("scripts", "packages.txt")) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.match(r"^\[(\w+)\]$", line)
            if m:
                current = m.group(1)
                sections[current] = []
            else:
                sections[current].append(line)
    return sections


def needed_libraries(executable):
    """{soname: resolved path} of the DT_NEEDED entries of `executable`."""
    dynamic = subprocess.run(["readelf", "-d", executable], capture_output=True, text=True,
                             check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic)
    ldd = subprocess.run(["ldd", executable], capture_output=True, text=True, check=True).stdout
    resolved = dict(re.findall(r"^\s*(\S+) => (/\S+)", ldd, re.M))
    for so in needed:  # the dynamic loader itself is listed without "=>"
        if so not in resolved:
            m = re.search(r"^\s*(/\S*%s) " % re.escape(so), ldd, re.M)
            if m:
                resolved[so] = m.group(1)
    return {so: resolved.get(so) for so in needed}


def package_of(file):
    candidates = [file, os.path.realpath(file)]
    for c in list(candidates):  # Debian 12 is usr-merged: dpkg knows one of the spellings
        if c.startswith("/usr/lib/"):
            candidates.append(c[len("/usr"):])
        elif c.startswith("/lib"):
            candidates.append("/usr" + c)
    for c in candidates:
        r = subprocess.run(["dpkg", "-S", c], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":", 1)[0].strip()
    return None


def installed_dependencies():
    """{package: set of packages it depends or pre-depends on} of installed packages."""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Depends}, ${Pre-Depends}\n"],
                         capture_output=True, text=True, check=True).stdout
    deps = {}
    for line in out.splitlines():
        name, _, rest = line.partition("\t")
        names = set()
        for group in rest.split(","):
            for alternative in group.split("|"):
                word = alternative.strip().split(" ")[0].split(":")[0]
                if word:
                    names.add(word)
        deps[name] = names
    return deps


def closure(roots, deps):
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo.extend(deps.get(p, ()))
    return seen


class Dockerfile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.steps = dockerfile_instructions()
        with open(path("deploy", "examples", "container.yaml")) as f:
            cls.config_text = f.read()
        cls.config = yaml.safe_load(cls.config_text)

    def stage(self, index):
        return [(word, rest) for s, word, rest in self.steps if s == index]

    def test_two_stages_on_debian_12(self):
        froms = [rest for _, word, rest in self.steps if word == "FROM"]
        self.assertEqual(froms, ["${DEBIAN_IMAGE} AS build", "${DEBIAN_IMAGE} AS runtime"])
        args = [rest for s, word, rest in self.steps if word == "ARG" and s == -1]
        self.assertIn("DEBIAN_IMAGE=debian:12", args)

    def test_packages_come_only_from_the_shared_list(self):
        runs = {i: [rest for word, rest in self.stage(i) if word == "RUN"] for i in (0, 1)}
        self.assertTrue(any("scripts/setup --only build" in r for r in runs[0]))
        self.assertTrue(any("/setup --only runtime" in r for r in runs[1]))
        for r in runs[0] + runs[1]:
            self.assertNotRegex(r, r"apt(-get)? install", "install through scripts/setup")
        copies = [rest for word, rest in self.stage(1) if word == "COPY"]
        self.assertIn("scripts/setup scripts/packages.txt /tmp/setup/", copies)

    def test_the_build_stage_makes_a_release_binary_without_tests(self):
        build = " ".join(rest for word, rest in self.stage(0) if word == "RUN")
        for flag in ("-DCMAKE_BUILD_TYPE=Release", "-DINFERGATE_TESTS=OFF",
                     "-DINFERGATE_BENCH=OFF", "--target infergate"):
            self.assertIn(flag, build)

    def test_the_runtime_stage_runs_the_binary_as_a_non_root_user(self):
        final = self.stage(1)
        self.assertIn(("COPY", "--from=build /build/gateway/infergate /usr/bin/infergate"), final)
        users = [rest for word, rest in final if word == "USER"]
        self.assertEqual(users, ["1000:1000"])
        self.assertIn(("ENTRYPOINT", '["/usr/bin/infergate"]'), final)
        self.assertIn(("CMD", '["--config", "/etc/infergate/infergate.yaml"]'), final)
        self.assertIn(("COPY", "deploy/examples/container.yaml /etc/infergate/infergate.yaml"),
                      final)
        self.assertIn(("STOPSIGNAL", "SIGTERM"), final)

    def test_ports_and_healthcheck_match_the_shipped_config(self):
        final = self.stage(1)
        listeners = self.config["listeners"]
        ports = sorted(int(l["address"].rsplit(":", 1)[1]) for l in listeners.values())
        exposed = [rest for word, rest in final if word == "EXPOSE"]
        self.assertEqual(exposed, [" ".join(str(p) for p in ports)])
        (health,) = [rest for word, rest in final if word == "HEALTHCHECK"]
        http_port = listeners["http"]["address"].rsplit(":", 1)[1]
        self.assertIn('"http://127.0.0.1:%s/v2/health/live"' % http_port, health)
        self.assertIn('"curl", "-fsS"', health)
        self.assertIn("curl", packages_sections()["runtime"], "the HEALTHCHECK needs curl")

    def test_the_shipped_config_validates(self):
        code, out = validate(self.config_text)
        self.assertEqual(code, 0, out)
        self.assertTrue(all(l["address"].startswith("0.0.0.0:")
                            for l in self.config["listeners"].values()),
                        "inside a container the listeners must not be on loopback")

    def test_dockerignore_keeps_what_the_build_copies(self):
        with open(path(".dockerignore")) as f:
            ignored = [l.strip() for l in f if l.strip() and not l.startswith("#")]
        self.assertIn("build", ignored)
        self.assertIn(".git", ignored)
        for needed in ("scripts", "deploy", "deploy/examples", "codecs", "gateway", "config",
                       "routing", "shm", "tls", "cmake", "CMakeLists.txt"):
            self.assertNotIn(needed, ignored)


class PackageList(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sections = packages_sections()

    def test_setup_lists_what_the_dockerfile_installs(self):
        out = subprocess.run([path("scripts", "setup"), "--list", "runtime"], capture_output=True,
                             text=True, check=True).stdout.split()
        self.assertEqual(out, self.sections["runtime"])
        bad = subprocess.run([path("scripts", "setup"), "--only", "nosuch"], capture_output=True,
                             text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("no section [nosuch]", bad.stderr)

    def test_the_runtime_list_has_no_build_packages(self):
        runtime = self.sections["runtime"]
        self.assertFalse([p for p in runtime if p.endswith("-dev") or p in self.sections["build"]])

    def test_the_runtime_list_covers_every_library_the_binary_links(self):
        deps = installed_dependencies()
        for p in self.sections["runtime"]:
            self.assertIn(p, deps, "%s is not installed here: scripts/setup installs [runtime]" % p)
        covered = closure(self.sections["runtime"], deps)
        libraries = needed_libraries(binary())
        self.assertIn("libgrpc++.so.1.51", libraries)
        missing = []
        for so, file in sorted(libraries.items()):
            self.assertIsNotNone(file, "ldd did not resolve " + so)
            package = package_of(file)
            self.assertIsNotNone(package, "no package owns " + file)
            if package in SANITIZER_PACKAGES:
                continue
            if package not in covered:
                missing.append("%s (%s)" % (package, so))
        self.assertEqual(missing, [], "add to [runtime] in scripts/packages.txt")

    def test_the_coverage_check_sees_a_missing_package(self):
        deps = installed_dependencies()
        without = [p for p in self.sections["runtime"] if p != "libyaml-cpp0.7"]
        self.assertNotIn("libyaml-cpp0.7", closure(without, deps))
        self.assertEqual(package_of(needed_libraries(binary())["libyaml-cpp.so.0.7"]),
                         "libyaml-cpp0.7")


if __name__ == "__main__":
    unittest.main()
