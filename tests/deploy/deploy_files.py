"""Reading the deployment files for the tests of tests/deploy/: the plain Kubernetes
manifests, the infergate config a ConfigMap carries, and `infergate validate`."""
import os
import subprocess
import tempfile

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy")
KUBERNETES = os.path.join(DEPLOY, "kubernetes")
SHAPES = ("sidecar", "fleet")


def path(*parts):
    return os.path.join(ROOT, *parts)


def binary():
    value = os.environ.get("INFERGATE_BIN")
    if not value:
        raise RuntimeError("INFERGATE_BIN must name the infergate binary (ctest sets it)")
    return value


def manifest(shape):
    """The objects of deploy/kubernetes/<shape>.yaml, in file order."""
    with open(os.path.join(KUBERNETES, shape + ".yaml")) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


def objects(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def one(docs, kind, name=None):
    found = [d for d in objects(docs, kind) if name is None or d["metadata"]["name"] == name]
    if len(found) != 1:
        raise AssertionError("expected one %s%s, found %d" % (kind, " " + name if name else "",
                                                               len(found)))
    return found[0]


def gateway_config_text(docs):
    """The infergate.yaml of the one ConfigMap that carries it."""
    carriers = [d for d in objects(docs, "ConfigMap") if "infergate.yaml" in d.get("data", {})]
    if len(carriers) != 1:
        raise AssertionError("expected one ConfigMap with infergate.yaml, found %d" % len(carriers))
    return carriers[0]["data"]["infergate.yaml"]


def validate(text, name="infergate.yaml"):
    """`infergate validate` of `text`: (exit code, stdout + stderr)."""
    with tempfile.TemporaryDirectory(prefix="infergate-deploy-") as d:
        p = os.path.join(d, name)
        with open(p, "w") as f:
            f.write(text)
        r = subprocess.run([binary(), "validate", p], capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout + r.stderr


def pod_spec(deployment):
    return deployment["spec"]["template"]["spec"]


def container(deployment, name):
    found = [c for c in pod_spec(deployment)["containers"] if c["name"] == name]
    if len(found) != 1:
        raise AssertionError("expected one container %s, found %d" % (name, len(found)))
    return found[0]


def gateway_deployment(docs):
    """The Deployment whose pod runs the infergate container."""
    found = [d for d in objects(docs, "Deployment")
             if any(c["name"] == "infergate" for c in pod_spec(d)["containers"])]
    if len(found) != 1:
        raise AssertionError("expected one Deployment running infergate, found %d" % len(found))
    return found[0]


def labels_match(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def memory_bytes(quantity):
    """A Kubernetes memory quantity ("512Mi", "1Gi", "268435456") in bytes."""
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
             "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12}
    text = str(quantity)
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix):
            return int(float(text[:-len(suffix)]) * units[suffix])
    return int(text)
