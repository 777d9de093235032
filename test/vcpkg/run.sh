#!/usr/bin/env bash
# The vcpkg port (ports/ptrain) and the manifest-mode consumer (test/package), tested without
# the vcpkg tool, which cannot be installed here:
#  1. the manifests against vcpkg's manifest rules (check_manifests.py), and the checker against
#     manifests that break them;
#  2. portfile.cmake's configure and install steps, run by CMake (run_portfile.cmake) into a
#     staging tree laid out as vcpkg's installed/<triplet>, with the consumer's features;
#  3. test/package configured, built and run against that tree, as vcpkg's toolchain would;
#  4. the port without its optional features: the consumer's find_package(ptrain COMPONENTS MPI)
#     must then fail, naming the component.
# NOT run here: vcpkg itself (its toolchain file, dependency resolution, building eigen3, zlib,
# openblas, libpng, libjpeg-turbo from its registry, its full post-build checks).
# Usage: test/vcpkg/run.sh. Exit 0 only if every step passed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
here=$repo/test/vcpkg
# In build/, at the same path each run: the consumer's compile lines hold it, so a compiler cache
# (scripts/env.sh) serves them the next time.
work=$repo/build/vcpkg-test
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
say() { printf 'vcpkg test: %s\n' "$*"; }

python3 "$here/check_manifests.py" "$repo/ports/ptrain" "$repo/test/package" "$repo/CMakeLists.txt"

# Each broken copy of the port's manifest must be refused with the sentence given.
broken_manifest() {  # $1: python expression editing the dict m, $2: expected message
  rm -rf "$work/broken" && mkdir -p "$work/broken/ptrain" && cp "$repo/ports/ptrain/"* "$work/broken/ptrain/"
  python3 - "$work/broken/ptrain/vcpkg.json" "$1" <<'PY'
import json, sys
path, edit = sys.argv[1], sys.argv[2]
m = json.load(open(path))
exec(edit)
json.dump(m, open(path, "w"))
PY
  if python3 "$here/check_manifests.py" "$work/broken/ptrain" "$repo/test/package" "$repo/CMakeLists.txt" \
      >"$work/broken.log" 2>&1; then
    say "the checker accepted a manifest where $1"
    exit 1
  fi
  grep -q -- "$2" "$work/broken.log" || { cat "$work/broken.log"; say "no '$2' for a manifest where $1"; exit 1; }
}
broken_manifest 'm["name"] = "PTrain"' "is not a vcpkg identifier"
broken_manifest 'm["features"]["image"].pop("description")' "a feature needs a description"
broken_manifest 'm["default-features"].append("gpu")' "'gpu' is not one of the features"
broken_manifest 'm["version-semver"] = "0.1.0"' "more than one version field"
broken_manifest 'm["version"] = "0.2.0"' "differs from the project VERSION"
broken_manifest 'm["dependencies"].append({"name": "zlib", "hosts": True})' "unknown key 'hosts'"
broken_manifest 'm["features"].pop("mpi")' "feature 'mpi' is not defined by the port"
say "the checker refuses 7 manifests that break the rules, each with its reason"

features=$(python3 -c 'import json, sys
port = json.load(open(sys.argv[1])); consumer = json.load(open(sys.argv[2]))
asked = [f for d in consumer["dependencies"] if isinstance(d, dict) and d["name"] == "ptrain" for f in d.get("features", [])]
print(";".join(["core"] + port.get("default-features", []) + asked))' "$repo/ports/ptrain/vcpkg.json" "$repo/test/package/vcpkg.json")
staging=$work/installed/x64-linux
run_port() {  # $1: features, $2: staging tree
  cmake "-DPORT_DIR=$repo/ports/ptrain" "-DPACKAGES_DIR=$2" "-DBUILDTREES_DIR=$work/buildtrees" \
    "-DFEATURES=$1" -P "$here/run_portfile.cmake" >"$work/port.log" 2>&1 || { cat "$work/port.log"; return 1; }
  grep "portfile.cmake of" "$work/port.log" | sed 's/^-- /vcpkg test: /'
}
run_port "$features" "$staging"

components=$(python3 -c 'import sys; print(";".join(f.upper() if f == "mpi" else f for f in sys.argv[1].split(";") if f in ("mpi", "image")))' "$features")
say "consumer test/package against $staging (components $components)"
cmake -S "$repo/test/package" -B "$work/consumer" "-DCMAKE_PREFIX_PATH=$staging" -DCMAKE_BUILD_TYPE=Release \
  "-DPTRAIN_PACKAGE_COMPONENTS=$components" >"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; exit 1; }
grep -q "ptrain .* from $staging/share/ptrain" "$work/consumer.log" ||
  { cat "$work/consumer.log"; say "find_package did not take ptrain from the staging tree's share/ptrain"; exit 1; }
cmake --build "$work/consumer" -j "$(nproc)" >"$work/consumer-build.log" 2>&1 || { cat "$work/consumer-build.log"; exit 1; }
"$work/consumer/consumer"
mpiexec -n 2 "$work/consumer/consumer_mpi"

run_port "core" "$work/core-only"
if cmake -S "$repo/test/package" -B "$work/consumer-core" "-DCMAKE_PREFIX_PATH=$work/core-only" \
    -DPTRAIN_PACKAGE_COMPONENTS=MPI >"$work/core.log" 2>&1; then
  say "find_package(ptrain COMPONENTS MPI) succeeded against a port built without the mpi feature"
  exit 1
fi
grep -q "ptrain was installed without its MPI component" "$work/core.log" || { cat "$work/core.log"; exit 1; }
say "without the mpi feature, find_package(ptrain COMPONENTS MPI) fails naming the component"
say "passed (manifests, portfile configure and install, consumer build and run; vcpkg itself not run)"
