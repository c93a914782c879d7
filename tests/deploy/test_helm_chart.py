"""The Helm chart (deploy/helm/infergate/) against the plain manifests it must reproduce.

Helm is not among Debian 12's packages and the project does not render Go templates
itself, so these checks read the chart as text: its templates are well formed (every
action closed, every block ended), every value they read exists in values.yaml, its
templates make the same objects (kind and name, for a release named as the manifests'
instance) in each mode, and the defaults in values.yaml are the settings of the plain
manifests: the infergate config text, images, ports, probes, resources, replicas, secrets,
grace period, autoscaling, disruption budget, session affinity."""
import os
import re
import unittest

import yaml

from deploy_files import (container, gateway_config_text, gateway_deployment, manifest, objects,
                          one, path, pod_spec)

CHART = path("deploy", "helm", "infergate")
TEMPLATES = os.path.join(CHART, "templates")
# The release names that reproduce the plain manifests' names.
RELEASE = {"sidecar": "triton-sidecar", "fleet": "infergate-fleet"}


def load_values():
    with open(os.path.join(CHART, "values.yaml")) as f:
        return yaml.safe_load(f)


def template_texts():
    texts = {}
    for name in sorted(os.listdir(TEMPLATES)):
        with open(os.path.join(TEMPLATES, name)) as f:
            texts[name] = f.read()
    return texts


def actions(text):
    """The text of every {{ ... }} action, trimmed of '-' markers and spaces."""
    return [a.strip("-").strip() for a in re.findall(r"\{\{(.*?)\}\}", text, re.S)]


def value_paths(text):
    """Every .Values.a.b path read, with $var := .Values.x aliases resolved."""
    aliases = dict(re.findall(r"(\$\w+)\s*:=\s*\.Values((?:\.\w+)+)", text))
    paths = re.findall(r"\.Values((?:\.\w+)+)", text)
    for var, base in aliases.items():
        paths += [base + rest for rest in re.findall(re.escape(var) + r"((?:\.\w+)+)", text)]
    return {p.lstrip(".") for p in paths}


def exists(values, dotted):
    node = values
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def chart_objects(mode, values):
    """(kind, name) of the objects the templates make in `mode` with the default values,
    for the release RELEASE[mode]: a template or document whose first line is an `if` on
    the mode or on a values switch that does not hold is skipped; names are read from the metadata
    line, with the release name and the values they name put in."""
    made = set()
    for file, text in template_texts().items():
        if not file.endswith(".yaml"):
            continue
        if not _guard_holds(text, mode, values):
            continue
        for doc in re.split(r"^---\s*$", text, flags=re.M):
            if not _guard_holds(doc, mode, values):
                continue
            kind = re.search(r"^kind: (\w+)$", doc, re.M)
            name = re.search(r"^metadata:\n  name: (.+)$", doc, re.M)
            if not kind or not name:
                continue
            made.add((kind.group(1), _render_name(name.group(1), mode, values, text)))
    return made


def _guard_holds(text, mode, values):
    """Whether the `if` on the first line of `text` (a template or one of its documents)
    holds: its mode test and its .enabled switches, read with the default values."""
    lines = [l for l in text.splitlines() if l.strip()]
    first = lines[0] if lines else ""
    if not first.lstrip().startswith("{{- if") and not first.lstrip().startswith("{{ if"):
        return True
    guard = re.search(r'eq \.Values\.mode "(\w+)"', first)
    if guard and guard.group(1) != mode:
        return False
    switches = re.findall(r"\.Values((?:\.\w+)+\.enabled)", first)
    return all(_get(values, s.lstrip(".")) for s in switches)


def _get(values, dotted):
    node = values
    for part in dotted.split("."):
        node = node[part]
    return node


def _render_name(expr, mode, values, text):
    aliases = dict(re.findall(r"(\$\w+)\s*:=\s*\.Values((?:\.\w+)+)", text))

    def one_action(match):
        inner = match.group(1).strip("-").strip()
        if inner == ".Release.Name":
            return RELEASE[mode]
        for var, base in aliases.items():
            if inner.startswith(var + "."):
                return str(_get(values, (base + inner[len(var):]).lstrip(".")))
        if inner.startswith(".Values."):
            return str(_get(values, inner[len(".Values."):]))
        raise AssertionError("a name the test cannot read: %s" % expr)

    return re.sub(r"\{\{(.*?)\}\}", one_action, expr).strip()


class ChartFiles(unittest.TestCase):
    def test_chart_metadata(self):
        with open(os.path.join(CHART, "Chart.yaml")) as f:
            chart = yaml.safe_load(f)
        self.assertEqual(chart["apiVersion"], "v2")
        self.assertEqual(chart["name"], "infergate")
        self.assertRegex(chart["version"], r"^\d+\.\d+\.\d+$")
        self.assertTrue(chart["appVersion"])

    def test_templates_are_well_formed(self):
        for file, text in template_texts().items():
            self.assertEqual(text.count("{{"), text.count("}}"), file)
            opened = ended = 0
            for a in actions(text):
                word = a.split()[0] if a.split() else ""
                if a.startswith("/*"):
                    continue
                if word in ("if", "range", "with", "define"):
                    opened += 1
                elif word == "end":
                    ended += 1
            self.assertEqual(opened, ended, "%s: %d blocks, %d ends" % (file, opened, ended))

    def test_every_value_a_template_reads_is_in_values_yaml(self):
        values = load_values()
        for file, text in template_texts().items():
            for p in value_paths(text):
                self.assertTrue(exists(values, p), "%s reads .Values.%s, not in values.yaml"
                                % (file, p))

    def test_the_read_check_catches_a_typo(self):
        self.assertFalse(exists(load_values(), "fleet.autoscaling.maxReplica"))
        self.assertEqual(value_paths("{{ $t := .Values.fleet.triton }}{{ $t.replica }}"),
                         {"fleet.triton", "fleet.triton.replica"})


class SameObjects(unittest.TestCase):
    def test_each_mode_makes_the_objects_of_its_plain_manifest(self):
        values = load_values()
        for mode in ("sidecar", "fleet"):
            plain = {(d["kind"], d["metadata"]["name"]) for d in manifest(mode)}
            self.assertEqual(chart_objects(mode, values), plain, mode)

    def test_switches_drop_their_objects(self):
        values = load_values()
        values["fleet"]["serviceMonitor"]["enabled"] = False
        values["networkPolicy"]["enabled"] = False
        made = {kind for kind, _ in chart_objects("fleet", values)}
        self.assertNotIn("ServiceMonitor", made)
        self.assertNotIn("NetworkPolicy", made)
        self.assertIn("Deployment", made)


class SameSettings(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.values = load_values()
        cls.docs = {mode: manifest(mode) for mode in ("sidecar", "fleet")}

    def gateway(self, mode):
        return container(gateway_deployment(self.docs[mode]), "infergate")

    def test_the_config_texts_are_the_manifests(self):
        self.assertEqual(self.values["config"], "")
        self.assertEqual(self.values["sidecarConfig"], gateway_config_text(self.docs["sidecar"]))
        self.assertEqual(self.values["fleetConfig"], gateway_config_text(self.docs["fleet"]))

    def test_image_ports_probes_and_user(self):
        v = self.values
        for mode in ("sidecar", "fleet"):
            c = self.gateway(mode)
            self.assertEqual(c["image"], "%s:%s" % (v["image"]["repository"], v["image"]["tag"]))
            self.assertEqual({p["name"]: p["containerPort"] for p in c["ports"]}, v["ports"])
            self.assertEqual(c["readinessProbe"]["httpGet"]["scheme"], v["probeScheme"])
            self.assertEqual(c["lifecycle"]["preStop"]["exec"]["command"],
                             ["sleep", str(v["preStopSleepSeconds"])])
            spec = pod_spec(gateway_deployment(self.docs[mode]))
            self.assertEqual(spec["terminationGracePeriodSeconds"],
                             v["terminationGracePeriodSeconds"])
            self.assertEqual(spec["securityContext"]["runAsUser"], v["runAsUser"])
            secrets = {vol["secret"]["secretName"] for vol in spec["volumes"] if "secret" in vol}
            self.assertEqual(secrets, set(v["secrets"].values()))

    def test_sidecar_settings(self):
        s = self.values["sidecar"]
        deployment = gateway_deployment(self.docs["sidecar"])
        triton = container(deployment, "triton")
        self.assertEqual(deployment["spec"]["replicas"], s["replicas"])
        self.assertEqual(self.gateway("sidecar")["resources"], s["resources"])
        self.assertEqual(triton["image"], s["triton"]["image"])
        self.assertEqual(triton["args"], s["triton"]["args"])
        self.assertEqual(triton["resources"], s["triton"]["resources"])
        volumes = {vol["name"]: vol for vol in pod_spec(deployment)["volumes"]}
        self.assertEqual(volumes["dshm"]["emptyDir"]["sizeLimit"], s["shmSizeLimit"])
        self.assertEqual(volumes["models"]["persistentVolumeClaim"]["claimName"],
                         s["triton"]["modelsClaim"])
        pdb = one(self.docs["sidecar"], "PodDisruptionBudget")
        self.assertEqual(pdb["spec"]["maxUnavailable"], s["podDisruptionBudget"]["maxUnavailable"])

    def test_fleet_settings(self):
        f = self.values["fleet"]
        docs = self.docs["fleet"]
        gateway = gateway_deployment(docs)
        # With the autoscaler on, the HPA owns the count: neither sets replicas.
        self.assertTrue(f["autoscaling"]["enabled"])
        self.assertNotIn("replicas", gateway["spec"])
        self.assertEqual(self.gateway("fleet")["resources"], f["resources"])
        hpa = one(docs, "HorizontalPodAutoscaler")["spec"]
        a = f["autoscaling"]
        self.assertEqual((hpa["minReplicas"], hpa["maxReplicas"]),
                         (a["minReplicas"], a["maxReplicas"]))
        self.assertEqual(hpa["metrics"][0]["resource"]["target"]["averageUtilization"],
                         a["targetCPUUtilizationPercentage"])
        self.assertEqual(hpa["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
                         a["scaleDownStabilizationSeconds"])
        pdb = one(docs, "PodDisruptionBudget")
        self.assertEqual(pdb["spec"]["minAvailable"], f["podDisruptionBudget"]["minAvailable"])
        front = one(docs, "Service", RELEASE["fleet"])
        self.assertEqual(front["spec"]["sessionAffinity"], f["sessionAffinity"])
        monitor = one(docs, "ServiceMonitor")
        self.assertEqual(monitor["spec"]["endpoints"][0]["interval"], f["serviceMonitor"]["interval"])
        t = f["triton"]
        triton = one(docs, "Deployment", RELEASE["fleet"] + "-triton")
        self.assertEqual(triton["spec"]["replicas"], t["replicas"])
        self.assertEqual(container(triton, "triton")["image"], t["image"])
        self.assertEqual(container(triton, "triton")["resources"], t["resources"])
        self.assertEqual(one(docs, "Service", t["headlessService"])["spec"]["clusterIP"], "None")
        self.assertIn("dns:%s." % t["headlessService"], gateway_config_text(docs))

    def test_network_policy_namespace(self):
        ns = self.values["networkPolicy"]["monitoringNamespace"]
        for mode in ("sidecar", "fleet"):
            for policy in objects(self.docs[mode], "NetworkPolicy"):
                selectors = [src["namespaceSelector"]["matchLabels"]
                             for rule in policy["spec"]["ingress"] for src in rule.get("from", [])
                             if "namespaceSelector" in src]
                self.assertEqual(selectors, [{"kubernetes.io/metadata.name": ns}])


if __name__ == "__main__":
    unittest.main()
