#!/usr/bin/env python3
"""Checks vcpkg manifests against vcpkg's manifest rules, without the vcpkg tool.

Usage: check_manifests.py PORT_DIR CONSUMER_DIR CMAKELISTS
  PORT_DIR      the overlay port (vcpkg.json, portfile.cmake, usage)
  CONSUMER_DIR  a manifest-mode consumer (vcpkg.json, vcpkg-configuration.json)
  CMAKELISTS    the project's CMakeLists.txt, whose project VERSION the port must carry

The rules are those of vcpkg's manifest reference and its JSON schema (vcpkg-tool's
docs/vcpkg.schema.json): the keys a manifest may have, identifiers, version formats, the form of
dependencies and features; then what vcpkg checks when it loads them: a port has exactly one
version and a description, default features exist, a consumer asks only for features the
overlay port defines, and the overlay directory holds the port. Prints each problem with the file
and the key; exits 1 if there is any.
"""
import json
import os
import re
import sys

IDENTIFIER = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
PORT_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*(\.[a-z0-9]+(-[a-z0-9]+)*)*$")
RESERVED = re.compile(r"^(prn|aux|nul|con|lpt[1-9]|com[1-9]|core|default)$")
PRERELEASE = r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
VERSIONS = {
    "version": re.compile(r"^\d+(\.\d+)*" + PRERELEASE + "$"),
    "version-semver": re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)" + PRERELEASE + "$"),
    "version-date": re.compile(r"^\d{4}-\d{2}-\d{2}(\.\d+)*$"),
    "version-string": re.compile(r"^[^#]+$"),
}
TOP_LEVEL_KEYS = {"name", "port-version", "maintainers", "summary", "description", "homepage", "documentation",
                  "license", "builtin-baseline", "dependencies", "overrides", "features", "default-features",
                  "supports", "vcpkg-configuration"} | set(VERSIONS)
DEPENDENCY_KEYS = {"name", "features", "host", "default-features", "platform", "version>="}
FEATURE_KEYS = {"description", "dependencies", "supports", "license"}
CONFIGURATION_KEYS = {"default-registry", "registries", "overlay-ports", "overlay-triplets"}


class Checker:
    def __init__(self):
        self.problems = []

    def fail(self, where, what):
        self.problems.append(f"{where}: {what}")

    def identifier(self, where, value, pattern=IDENTIFIER):
        if not isinstance(value, str) or not pattern.match(value) or any(
                RESERVED.match(part) for part in value.split(".")):
            self.fail(where, f"{value!r} is not a vcpkg identifier (lowercase letters, digits and single dashes, "
                             "not a reserved name such as core or default)")

    def string_or_strings(self, where, value):
        if not (isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))):
            self.fail(where, "expected a string or an array of strings")

    def keys(self, where, obj, allowed):
        if not isinstance(obj, dict):
            self.fail(where, "expected an object")
            return False
        for key in obj:
            if key not in allowed and not key.startswith("$"):
                self.fail(where, f"unknown key {key!r} (allowed: {', '.join(sorted(allowed))})")
        return True

    def dependency(self, where, dep):
        if isinstance(dep, str):
            self.identifier(where, dep, PORT_NAME)
            return
        if not self.keys(where, dep, DEPENDENCY_KEYS):
            return
        if "name" not in dep:
            self.fail(where, "a dependency object needs a name")
        else:
            self.identifier(f"{where}.name", dep["name"], PORT_NAME)
        for feature in dep.get("features", []):
            name = feature["name"] if isinstance(feature, dict) else feature
            self.identifier(f"{where}.features", name)
        for key in ("host", "default-features"):
            if key in dep and not isinstance(dep[key], bool):
                self.fail(f"{where}.{key}", "expected true or false")
        if "version>=" in dep and not re.match(r"^[^#]+(#\d+)?$", str(dep["version>="])):
            self.fail(f"{where}.version>=", f"{dep['version>=']!r} is not a version")

    def manifest(self, path, is_port):
        where = os.path.relpath(path)
        with open(path, encoding="utf-8") as f:
            try:
                m = json.load(f)
            except json.JSONDecodeError as e:
                self.fail(where, f"not JSON: {e}")
                return None
        if not self.keys(where, m, TOP_LEVEL_KEYS):
            return None
        versions = [key for key in VERSIONS if key in m]
        if len(versions) > 1:
            self.fail(where, f"more than one version field: {versions}")
        for key in versions:
            if not isinstance(m[key], str) or not VERSIONS[key].match(m[key]):
                self.fail(f"{where}.{key}", f"{m[key]!r} is not a valid {key}")
        if "port-version" in m and not (isinstance(m["port-version"], int) and m["port-version"] >= 0):
            self.fail(f"{where}.port-version", "expected a non-negative integer")
        if is_port:
            for key in ("name", "description"):
                if key not in m:
                    self.fail(where, f"a port needs a {key!r}")
            if not versions:
                self.fail(where, "a port needs one of " + ", ".join(VERSIONS))
        if "name" in m:
            self.identifier(f"{where}.name", m["name"], PORT_NAME)
        for key in ("description", "maintainers"):
            if key in m:
                self.string_or_strings(f"{where}.{key}", m[key])
        if "license" in m and m["license"] is not None and not isinstance(m["license"], str):
            self.fail(f"{where}.license", "expected an SPDX license expression or null")
        for i, dep in enumerate(m.get("dependencies", [])):
            self.dependency(f"{where}.dependencies[{i}]", dep)
        features = m.get("features", {})
        if self.keys(f"{where}.features", features, set(features)):
            for name, feature in features.items():
                self.identifier(f"{where}.features", name)
                if not self.keys(f"{where}.features.{name}", feature, FEATURE_KEYS):
                    continue
                if "description" not in feature:
                    self.fail(f"{where}.features.{name}", "a feature needs a description")
                else:
                    self.string_or_strings(f"{where}.features.{name}.description", feature["description"])
                for i, dep in enumerate(feature.get("dependencies", [])):
                    self.dependency(f"{where}.features.{name}.dependencies[{i}]", dep)
        for default in m.get("default-features", []):
            name = default["name"] if isinstance(default, dict) else default
            if name not in features:
                self.fail(f"{where}.default-features", f"{name!r} is not one of the features {sorted(features)}")
        return m


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    port_dir, consumer_dir, cmakelists = argv[1:]
    c = Checker()
    port = c.manifest(os.path.join(port_dir, "vcpkg.json"), is_port=True)
    consumer = c.manifest(os.path.join(consumer_dir, "vcpkg.json"), is_port=False)
    for name in ("portfile.cmake", "usage"):
        if not os.path.isfile(os.path.join(port_dir, name)):
            c.fail(os.path.relpath(port_dir), f"the port has no {name}")
    if port:
        if os.path.basename(os.path.normpath(port_dir)) != port.get("name"):
            c.fail(os.path.relpath(port_dir), f"an overlay port's directory must carry its name {port.get('name')!r}")
        with open(cmakelists, encoding="utf-8") as f:
            project = re.search(r"project\(\s*\S+\s+VERSION\s+([0-9.]+)", f.read())
        if not project or port.get("version") != project.group(1):
            c.fail(os.path.relpath(port_dir), f"version {port.get('version')!r} differs from the project VERSION "
                                              f"{project.group(1) if project else '(none)'} in {cmakelists}")
    configuration_path = os.path.join(consumer_dir, "vcpkg-configuration.json")
    where = os.path.relpath(configuration_path)
    with open(configuration_path, encoding="utf-8") as f:
        configuration = json.load(f)
    if c.keys(where, configuration, CONFIGURATION_KEYS):
        overlays = [os.path.normpath(os.path.join(consumer_dir, p)) for p in configuration.get("overlay-ports", [])]
        if os.path.normpath(os.path.dirname(os.path.abspath(port_dir))) not in map(os.path.abspath, overlays):
            c.fail(f"{where}.overlay-ports", f"{overlays} does not hold the port directory {port_dir}")
    if port and consumer:
        for i, dep in enumerate(consumer.get("dependencies", [])):
            if isinstance(dep, dict) and dep.get("name") == port.get("name"):
                for feature in dep.get("features", []):
                    name = feature["name"] if isinstance(feature, dict) else feature
                    if name not in port.get("features", {}):
                        c.fail(f"{os.path.relpath(consumer_dir)}/vcpkg.json.dependencies[{i}]",
                               f"feature {name!r} is not defined by the port (it has {sorted(port['features'])})")
    for problem in c.problems:
        print(f"vcpkg manifest check: {problem}")
    if c.problems:
        return 1
    print(f"vcpkg manifest check: {port_dir}/vcpkg.json and {consumer_dir}/vcpkg.json follow vcpkg's manifest rules")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
