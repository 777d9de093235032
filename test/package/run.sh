#!/usr/bin/env bash
# The installed-package test: install the build tree, build test/package against the install,
# run it; then move the install elsewhere and do it again (the package must be relocatable).
# Usage: test/package/run.sh [build-dir]   (default: build). Exit 0 only if every step passed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
# In the build folder, at the same path each run: the consumers' compile lines hold it, so a
# compiler cache (scripts/env.sh) serves them the next time.
work=$build/package-test
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
jobs=$(nproc)

say() { printf 'package test: %s\n' "$*"; }

# The install and its consumer's build folder side by side, and after the move the same two names
# side by side in another folder: the consumer's compile lines, made relative by the compiler
# cache's base_dir, are then the same in both places, so the moved install's consumers are built
# from the cache (their link and run are the moved install's own).
install_prefix=$work/installed/ptrain
cmake --install "$build" --prefix "$install_prefix" >"$work/install.log"
config_dir="$install_prefix/lib/cmake/ptrain"
[ -f "$config_dir/ptrainConfig.cmake" ] || { say "no ptrainConfig.cmake under $config_dir"; exit 1; }

# Every library the targets link must be found on the consumer's machine (find_dependency in
# the config), never named by the path it had on the machine that installed ptrain.
if grep -nE '(^|[";])/[^";]*\.(so|a)([.0-9]*)?([";]|$)' "$config_dir"/*Targets.cmake >"$work/absolute.txt"; then
  cat "$work/absolute.txt" >&2
  say "the installed targets link libraries by absolute path (above); expected imported targets"
  exit 1
fi

components=()
[ -f "$config_dir/ptrain_mpiTargets.cmake" ] && components+=(MPI)
[ -f "$config_dir/ptrain_cudaTargets.cmake" ] && components+=(CUDA)
component_list=$(IFS=';'; echo "${components[*]:-}")
say "installed with components: ${component_list:-none}"

# Exit status of a CUDA consumer run: 0 ran, 2 + message means no device here.
cuda_not_run=""
run_consumers() {  # $1: consumer build dir
  "$1/consumer"
  "$1/consumer_header_only"
  # consumer calls the prebuilt library's relu (an undefined symbol in its object, defined in the
  # library); consumer_header_only compiles its own (emitted or inlined: never undefined).
  if grep -q libptrain_prebuilt "$1/CMakeFiles/consumer.dir/link.txt"; then
    relu='ptrain::Var<float, ptrain::Cpu> ptrain::relu<float, ptrain::Cpu>'
    nm -C "$1/CMakeFiles/consumer.dir/main.cpp.o" | grep -F " U $relu" >/dev/null ||
      { say "consumer compiled relu<float> itself: the prebuilt library's extern templates were not in effect"; return 1; }
    if nm -C "$1/CMakeFiles/consumer_header_only.dir/main.cpp.o" | grep -F " U $relu" >/dev/null; then
      say "consumer_header_only left relu<float> to a library: it must compile (or inline) its own"; return 1
    fi
    say "consumer takes relu<float> from the prebuilt library; consumer_header_only compiles its own"
  else
    say "consumer links no prebuilt library (a PTRAIN_HEADER_ONLY install): both consumers are header-only"
  fi
  if [ -x "$1/consumer_mpi" ]; then
    mpiexec -n 2 "$1/consumer_mpi"
    mpiexec -n 3 "$1/consumer_mpi"
  fi
  if [ -x "$1/consumer_cuda" ]; then
    set +e
    "$1/consumer_cuda" 2>"$work/cuda.err"
    local rc=$?
    set -e
    if [ $rc -eq 2 ] && grep -q "no CUDA device found" "$work/cuda.err"; then
      cuda_not_run="consumer_cuda compiled against the installed ptrain::cuda but NOT RUN: $(head -n 1 "$work/cuda.err")"
      say "$cuda_not_run"
    elif [ $rc -ne 0 ]; then
      cat "$work/cuda.err" >&2
      say "consumer_cuda failed with exit code $rc"
      return 1
    fi
  fi
}

build_and_run() {  # $1: consumer build dir, then its configure options
  local dir=$1
  shift
  cmake -S "$repo/test/package" -B "$dir" "$@" "-DPTRAIN_PACKAGE_COMPONENTS=$component_list" \
    >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; return 1; }
  grep "ptrain .* from" "$dir.configure.log" | sed 's/^-- /package test: found /'
  cmake --build "$dir" -j "$jobs" >"$dir.build.log" 2>&1 || { cat "$dir.build.log"; return 1; }
  run_consumers "$dir"
}

say "consumer against $install_prefix"
build_and_run "$work/installed/consumer" -DCMAKE_PREFIX_PATH="$install_prefix" -DCMAKE_BUILD_TYPE=Release

# A component the install does not have must fail find_package with the config's sentence.
if cmake -S "$repo/test/package" -B "$work/pkg-bogus" -DCMAKE_PREFIX_PATH="$install_prefix" \
    -DPTRAIN_PACKAGE_COMPONENTS=Bogus >"$work/bogus.log" 2>&1; then
  say "find_package(ptrain COMPONENTS Bogus) succeeded; it must fail"
  exit 1
fi
grep -q "ptrain was installed without its Bogus component" "$work/bogus.log" ||
  { cat "$work/bogus.log"; say "missing component failed without naming it"; exit 1; }
say "a missing component fails find_package with its name, as it should"

moved_prefix=$work/moved/ptrain
mkdir -p "$work/moved"
mv "$install_prefix" "$moved_prefix"
if grep -rqF "$install_prefix" "$moved_prefix"; then
  grep -rlF "$install_prefix" "$moved_prefix" >&2
  say "the install records its own prefix: not relocatable"
  exit 1
fi
say "consumer against the moved install $moved_prefix"
build_and_run "$work/moved/consumer" -DCMAKE_PREFIX_PATH="$moved_prefix" -DCMAKE_BUILD_TYPE=Release

# ptrain added by add_subdirectory, the consumer choosing no build type: the consumer's
# CMakeLists.txt fails if ptrain changed it or defined its own programs.
say "consumer with ptrain as a subproject (add_subdirectory), no CMAKE_BUILD_TYPE"
build_and_run "$work/pkg-subproject" -DPTRAIN_SOURCE_DIR="$repo" \
  "-DPTRAIN_CUDA=$(case ";$component_list;" in *";CUDA;"*) echo ON ;; *) echo OFF ;; esac)"
say "passed (install, consumer build and run, relocated install, subproject${component_list:+, components $component_list})"
