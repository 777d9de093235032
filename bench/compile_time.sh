#!/bin/sh
# What a user's program costs to compile: times, one compile at a time on one core, the smallest
# ResNet-18 user program (bench/compile_time/resnet18_ptrain.cpp: <ptrain/ptrain.hpp>, ResNet-18
# with the CIFAR stem, Sgd, one Trainer, fit on random data, save_state_dict) header-only and, once
# it exists, against the prebuilt library; examples/resnet_cifar10.cpp; and, where pip's torch is in
# the bench venv (bench/torch_venv.sh, which makes it when missing), the same ResNet-18 program
# against libtorch's headers (bench/compile_time/resnet18_libtorch.cpp). Prints, per program, the
# compile's wall seconds, CPU seconds (user + sys) and peak compiler memory (/usr/bin/time -v:
# maximum resident set size), the link's seconds and whether the linked program ran (64 images,
# 1 epoch), then the ratios of ptrain's programs to libtorch's, and the host load before and after.
# Wall seconds grow with the host's load; CPU seconds and peak memory much less.
#
# Usage: bench/compile_time.sh [CONFIG_DIR]
#   CONFIG_DIR (default ${TMPDIR:-/tmp}/ptrain-compile-time): a CMake build directory of its own,
#   only configured (Release, PTRAIN_CUDA=OFF, Unix Makefiles): the flags of each ptrain program
#   are read from its target there (flags.make, link.txt), so they stay the project's. Nothing of
#   the project is built; the objects, programs and logs go to CONFIG_DIR/compile_time.
# The compiler is called directly (no ccache or other launcher; CCACHE_DISABLE=1 anyway). libtorch's
# program gets the same compiler and flags as ptrain's, with torch's include directories and its
# _GLIBCXX_USE_CXX11_ABI. The prebuilt case is measured when the configure has a
# bench_compile_time_ptrain_prebuilt target (bench/CMakeLists.txt); its library target
# (PTRAIN_PREBUILT_TARGET, default ptrain_prebuilt) is built first, untimed.
# Exits non-zero with a message when a compile (or a ptrain link or run) fails.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
cfg=${1:-${TMPDIR:-/tmp}/ptrain-compile-time}
mkdir -p "$cfg/compile_time"
cfg=$(cd "$cfg" && pwd)
work=$cfg/compile_time
export CCACHE_DISABLE=1
die() { echo "compile_time.sh: $*" >&2; exit 1; }
[ -x /usr/bin/time ] || die "no /usr/bin/time (apt-get install time)"
cmake -S "$src" -B "$cfg" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release -DPTRAIN_CUDA=OFF -DPTRAIN_BUILD_TESTS=OFF \
  -DPTRAIN_BUILD_EXAMPLES=ON -DPTRAIN_BUILD_BENCH=ON >"$work/configure.log" 2>&1 ||
  die "configuring $cfg failed (see $work/configure.log)"

echo "bench=load uptime=\"$(uptime)\""

# The value of KEY in a flags.make (KEY = value, in the shell's quoting).
flag() { sed -n "s/^$2 = //p" "$1"; }
# time_it NAME CMD...: runs CMD under /usr/bin/time -v; sets secs, cpu, peak_mb. Output in NAME.log.
time_it() {
  name=$1; shift
  if ! /usr/bin/time -v -o "$work/$name.time" "$@" >"$work/$name.log" 2>&1; then
    tail -n 30 "$work/$name.log" >&2
    return 1
  fi
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; ++i) s = s * 60 + p[i]; printf "%.1f", s }' "$work/$name.time")
  cpu=$(awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { printf "%.1f", u + s }' "$work/$name.time")
  peak_mb=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$work/$name.time")
}
# measure PROGRAM TARGET_DIR TARGET SOURCE RUN_ARGS: compiles SOURCE with TARGET's flags (timed),
# links it with TARGET's link line (timed), runs it with RUN_ARGS unless RUN_ARGS is "-".
measure() {
  program=$1 dir=$2 target=$3 source=$4 run_args=$5
  tdir=$dir/CMakeFiles/$target.dir
  [ -f "$tdir/flags.make" ] || die "no $tdir/flags.make: the configure defined no $target"
  cxx=$(sed -n 's/^# compile CXX with //p' "$tdir/flags.make")
  obj=$work/$program.o exe=$work/$program
  # The flags are in make's (the shell's) quoting: eval gives them back their words.
  eval "set -- \"\$cxx\" $(flag "$tdir/flags.make" CXX_DEFINES) $(flag "$tdir/flags.make" CXX_INCLUDES) \
    $(flag "$tdir/flags.make" CXX_FLAGS) -c \"\$source\" -o \"\$obj\""
  echo "$*" >"$work/$program.command"
  time_it "$program" "$@" || die "compiling $source for $program failed (see $work/$program.log)"
  c_secs=$secs c_cpu=$cpu c_peak=$peak_mb
  link=$(sed "s#CMakeFiles/$target.dir/[^ ]*\.o#\"\$obj\"#; s# -o $target # -o \"\$exe\" #" "$tdir/link.txt")
  eval "set -- $link"
  (cd "$dir" && time_it "$program.link" "$@") || die "linking $program failed (see $work/$program.link.log)"
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; ++i) s = s * 60 + p[i]; printf "%.1f", s }' "$work/$program.link.time")
  ran=not_run
  if [ "$run_args" != - ]; then
    # shellcheck disable=SC2086
    (cd "$work" && "$exe" $run_args) >"$work/$program.run.log" 2>&1 || die "$program failed to run (see $work/$program.run.log)"
    ran=yes
  fi
  echo "bench=compile_time program=$program seconds=$c_secs cpu_seconds=$c_cpu peak_mb=$c_peak link_seconds=$secs ran=$ran"
  eval "r_${program}=\"$c_secs $c_cpu $c_peak\""
}
ratio() {  # ratio A B: A's compile over B's, for those measured
  eval "a=\${r_$1:-} b=\${r_$2:-}"
  [ -n "$a" ] && [ -n "$b" ] || return 0
  echo "$a $b" | awk -v name="$1/$2" '{ printf "bench=compile_time ratio=%s seconds=%.2f cpu_seconds=%.2f peak_mb=%.2f\n", name, $1 / $4, $2 / $5, $3 / $6 }'
}

# ptrain, header-only.
measure resnet18_ptrain_header_only "$cfg/bench" bench_compile_time_ptrain "$here/compile_time/resnet18_ptrain.cpp" \
  "64 1 resnet18_ptrain_header_only.safetensors"

# ptrain, with the prebuilt library (extern templates): once the target exists.
if [ -d "$cfg/bench/CMakeFiles/bench_compile_time_ptrain_prebuilt.dir" ]; then
  lib=${PTRAIN_PREBUILT_TARGET:-ptrain_prebuilt}
  cmake --build "$cfg" --target "$lib" >"$work/prebuilt_library.log" 2>&1 ||
    die "building the prebuilt library ($lib) failed (see $work/prebuilt_library.log)"
  measure resnet18_ptrain_prebuilt "$cfg/bench" bench_compile_time_ptrain_prebuilt \
    "$here/compile_time/resnet18_ptrain.cpp" "64 1 resnet18_ptrain_prebuilt.safetensors"
else
  echo 'bench=compile_time program=resnet18_ptrain_prebuilt status=unavailable reason="no prebuilt library yet"'
fi

# An example as the project builds it (it needs CIFAR-10's files to run: linked, not run).
measure resnet_cifar10 "$cfg/examples" resnet_cifar10 "$src/examples/resnet_cifar10.cpp" -

# libtorch: the same ResNet-18 program, same compiler and flags, torch's headers and ABI.
if python=$(sh "$here/torch_venv.sh"); then
  tdir=$cfg/bench/CMakeFiles/bench_compile_time_ptrain.dir
  cxx=$(sed -n 's/^# compile CXX with //p' "$tdir/flags.make")
  torch_info=$("$python" -c 'import shlex, torch, torch.utils.cpp_extension as c
print(torch.__version__)
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(" ".join("-isystem " + shlex.quote(p) for p in c.include_paths()))
print(c.library_paths()[0])' 2>/dev/null) || die "$python could not tell torch's include paths"
  version=$(echo "$torch_info" | sed -n 1p) abi=$(echo "$torch_info" | sed -n 2p)
  includes=$(echo "$torch_info" | sed -n 3p) torch_lib=$(echo "$torch_info" | sed -n 4p)
  program=resnet18_libtorch source=$here/compile_time/resnet18_libtorch.cpp obj=$work/resnet18_libtorch.o
  eval "set -- \"\$cxx\" -D_GLIBCXX_USE_CXX11_ABI=$abi $includes $(flag "$tdir/flags.make" CXX_FLAGS) \
    -c \"\$source\" -o \"\$obj\""
  echo "$*" >"$work/$program.command"
  time_it "$program" "$@" || die "compiling $source against torch $version failed (see $work/$program.log)"
  c_secs=$secs c_cpu=$cpu c_peak=$peak_mb
  # Linking is optional: the measurement is the compile.
  link_secs=none ran=not_linked
  if time_it "$program.link" "$cxx" -O3 -DNDEBUG "$obj" -o "$work/$program" -L"$torch_lib" -Wl,-rpath,"$torch_lib" \
    -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -Wl,--as-needed 2>/dev/null; then
    link_secs=$secs ran=no
    (cd "$work" && "./$program" 64 1 resnet18_libtorch.pt) >"$work/$program.run.log" 2>&1 && ran=yes
  fi
  echo "bench=compile_time program=$program torch=$version seconds=$c_secs cpu_seconds=$c_cpu peak_mb=$c_peak link_seconds=$link_secs ran=$ran"
  eval "r_${program}=\"$c_secs $c_cpu $c_peak\""
else
  echo 'bench=compile_time program=resnet18_libtorch status=unavailable reason="bench/torch_venv.sh found no venv with torch and could not make one"'
fi

ratio resnet18_ptrain_header_only resnet18_libtorch
ratio resnet18_ptrain_prebuilt resnet18_libtorch
ratio resnet18_ptrain_prebuilt resnet18_ptrain_header_only
ratio resnet_cifar10 resnet18_libtorch
echo "bench=load uptime=\"$(uptime)\""
