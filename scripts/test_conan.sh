#!/usr/bin/env bash
# The Conan 2 package: installs Conan from PyPI into a virtual environment kept outside the clone
# (~/.cache/ptrain/conan-VERSION-venv, made once: 23 s of each clean clone's CI went to it), then runs `conan create` of conanfile.py with its test_package in a fresh Conan home, with the
# dependencies from Debian's packages (conan/profiles/debian12; no remote is used). Exits non-zero
# when any step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
conan_version=2.34.0
venv=${PTRAIN_CONAN_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ptrain/conan-$conan_version-venv}
say() { printf 'conan test: %s\n' "$*"; }

if [ ! -x "$venv/bin/conan" ] || [ "$("$venv/bin/conan" --version 2>/dev/null)" != "Conan version $conan_version" ]; then
  say "installing conan==$conan_version from PyPI into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "conan==$conan_version"
fi

# A fresh Conan home in build/, at the same path each run: the package's compile lines hold it, so
# a compiler cache (scripts/env.sh) serves them the next time.
CONAN_HOME=$PWD/build/conan-home
rm -rf "$CONAN_HOME" && mkdir -p "$CONAN_HOME"
export CONAN_HOME
trap 'rm -rf "$CONAN_HOME"' EXIT
conan=("$venv/bin/conan")
"${conan[@]}" profile detect >/dev/null 2>&1
# Conan Center is not reachable here: nothing may be looked up in a remote.
"${conan[@]}" remote remove conancenter >/dev/null
start=$SECONDS
"${conan[@]}" create . --profile:all conan/profiles/debian12 --build=missing \
  -s compiler.cppstd=20 -o "ptrain/*:with_mpi=True" -o "ptrain/*:with_image=True"
say "passed: conan create with test_package (core, image and MPI components) in $((SECONDS - start)) s"
