#!/usr/bin/env bash
# The GPU bundle (docs/gpu_run.md): ptrain's CUDA programs built here, with every shared library they
# need that the GPU machine's image does not have and the examples' small generated data, in one
# archive that scripts/gpu_check.sh unpacks and runs there.
#
#   scripts/gpu_bundle.sh [OUT_DIR]
#     builds the CUDA programs for sm_90 at -O3 in build-gpu/ (PTRAIN_GPU_BUILD_DIR), then collects
#     them into OUT_DIR (default gpu-bundle/, ignored by git), every program required
#   scripts/gpu_bundle.sh --collect-from BUILD_DIR OUT_DIR [--require "NAME..."] [--limit-mib N] [--fast]
#     collects what BUILD_DIR already holds (CI runs it on its compile-only build: ctest
#     gpu/bundle_collect); --require names the programs that must be there (default: all of them);
#     --fast compresses at xz -1 (a fifth of the time, an archive a third larger: a size check
#     that passes then passes for the default -6 too)
#
# OUT_DIR then holds ptrain-gpu.tar.xz (bin/, lib/, data/, MANIFEST.txt) and MANIFEST.txt beside
# it: a line per file (sha256, bytes, path, what it is), how it was built, the glibc it needs,
# the libraries expected from the image, the programs missing, and the archive's own sha256.
# Checks, each failure said in a sentence: the required programs are there; every program's and
# library's `ldd` resolves inside the bundle, to glibc, or to a library the image has (the driver,
# and cuBLAS, NCCL, cuDNN from its PyTorch's `nvidia` packages: too large to carry, 0.8 GB); each
# program loads with the bundle's libraries (--help, or its usage); the archive is under
# --limit-mib (default 56) and, with the working tree's tracked files, under the 64 MiB that
# travel to the GPU machine.
# Exit status: 0 the bundle is complete and small enough; 1 it is not; 2 bad usage.
set -euo pipefail
trap 'echo "gpu_bundle: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
root=$PWD

# name|path under the build folder|what it is
programs=(
  "cuda_device_check|test/cuda/cuda_device_check|the CUDA device and kernels against the CPU results (ctest cuda/device_check)"
  "cuda_header_checks|test/cuda/cuda_header_checks|every CUDA header compiled on its own (ctest cuda/headers_self_contained)"
  "fashion_mnist_cuda|examples/fashion_mnist_cuda|the Fashion-MNIST demo on the GPU (fp32, bf16, fp16; NCCL; pipeline)"
  "resnet_cifar10_cuda|examples/resnet_cifar10_cuda|ResNet on CIFAR-10 on the GPU (NCCL; Sharded)"
  "imagenet_resnet_cuda|examples/imagenet_resnet_cuda|ResNet on an ImageNet-style tree, fp16 AMP (MixedPrecision<Fp16, Cuda>)"
  "transformer_lm_cuda|examples/transformer_lm_cuda|the transformer language model on the GPU (NCCL; pipeline; Sharded)"
  "bench_cuda_throughput|bench/bench_cuda_throughput|images/s and GPU memory of ResNet-50 and CIFAR ResNet-18, fp32 and fp16 AMP"
)
all_programs=$(printf '%s\n' "${programs[@]}" | cut -d'|' -f1 | paste -sd' ' -)
# The examples' data gpu_check.sh uses: name|generator|its output's subfolder|what it is. Fashion-MNIST
# is the real one (the smoke runs' floor is set on it: the tiny generated set cannot reach it),
# cut to the training images those runs read (--limit 2048) and the whole test set: 5 MB.
fashion_mnist_root=${PTRAIN_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
fashion_mnist_train_images=2048
datasets=(
  "fashion_mnist|fashion_mnist_subset|.|Fashion-MNIST's IDX files from $fashion_mnist_root (Debian's dataset-fashion-mnist): the first $fashion_mnist_train_images training images, the whole test set"
  "cifar10|make_example_data|cifar10|CIFAR-10 binary batches, tiny (make_example_data)"
  "imagenet|make_example_data|imagenet|an ImageNet-style JPEG tree, tiny (make_example_data)"
  "wikitext|make_wikitext_data|.|a WikiText-2-form corpus of a small grammar (examples/testdata/make_wikitext_data.cpp)"
)

# The image provides these (not carried): the driver's libraries, and PyTorch's cuBLAS, NCCL, cuDNN
# and the other CUDA libraries of its `nvidia` packages. The CUDA runtime is carried (0.7 MB), so
# the programs run on the runtime they were built with.
from_image() {
  case $1 in
    libcuda.so* | libnvidia-*.so* | libcublas.so* | libcublasLt.so* | libnccl.so* | libcudnn*.so* | libcufft*.so* | \
      libcurand.so* | libcusolver*.so* | libcusparse*.so* | libnvJitLink.so* | libnvrtc*.so*) return 0 ;;
  esac
  return 1
}
# glibc's own libraries: every Linux image has them (the manifest says which version is needed).
from_glibc() {
  case $1 in
    linux-vdso.so* | ld-linux*.so* | libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | librt.so.1 | \
      libresolv.so.2 | libutil.so.1 | libanl.so.1) return 0 ;;
  esac
  return 1
}
image_libraries="libcuda.so.1 (the driver), libcublas.so.13, libcublasLt.so.13, libnccl.so.2 (and cuDNN, were it linked)"

# fashion_mnist_subset OUT: the real Fashion-MNIST's test files as they are, and its training
# files cut to their first $fashion_mnist_train_images records (the IDX header's count rewritten).
fashion_mnist_subset() {
  local out=$1
  if [ ! -f "$fashion_mnist_root/train-images-idx3-ubyte.gz" ]; then
    problem "no Fashion-MNIST in $fashion_mnist_root (scripts/setup.sh installs Debian's dataset-fashion-mnist)"
    return 0
  fi
  mkdir -p "$out"
  cp "$fashion_mnist_root"/t10k-images-idx3-ubyte.gz "$fashion_mnist_root"/t10k-labels-idx1-ubyte.gz "$out"/
  python3 - "$fashion_mnist_root" "$out" "$fashion_mnist_train_images" <<'PY'
import gzip, struct, sys
root, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for name, header_ints in (("train-images-idx3-ubyte.gz", 4), ("train-labels-idx1-ubyte.gz", 2)):
    data = gzip.open(f"{root}/{name}").read()
    header = list(struct.unpack(f">{header_ints}I", data[: 4 * header_ints]))
    record = 1
    for d in header[2:]:
        record *= d
    assert header[1] >= n, f"{name} holds {header[1]} records, fewer than {n}"
    header[1] = n
    body = data[4 * header_ints : 4 * header_ints + n * record]
    with gzip.GzipFile(f"{out}/{name}", "wb", mtime=0) as f:
        f.write(struct.pack(f">{header_ints}I", *header) + body)
PY
}

usage() {
  sed -n '6,14p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

problems=()
problem() {
  problems+=("$*")
  echo "gpu_bundle: $*" >&2
}

# The libraries FILE needs (ldd: "soname => path" lines), as "soname path" ("not" for not found).
needed() {
  LD_LIBRARY_PATH=${2:-} ldd "$1" 2>/dev/null | awk '$2 == "=>" { print $1, $3 }'
}

collect() {
  local build=$1 out=$2 require=$3 limit_mib=$4 level=$5
  [ -d "$build" ] || { echo "gpu_bundle: no build folder $build" >&2; exit 2; }
  build=$(cd "$build" && pwd)
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  local stage
  stage=$(mktemp -d "${TMPDIR:-/tmp}/ptrain-gpu-bundle.XXXXXX")
  # shellcheck disable=SC2064  # the folder is known now
  trap "rm -rf '$stage'" EXIT
  mkdir -p "$stage/bin" "$stage/lib" "$stage/data"
  declare -A what=()

  # The programs, stripped (a third of their size: nvcc's template symbols).
  local missing=() entry name rel description
  for entry in "${programs[@]}"; do
    IFS='|' read -r name rel description <<<"$entry"
    if [ -x "$build/$rel" ]; then
      strip -o "$stage/bin/$name" "$build/$rel" 2>/dev/null || cp "$build/$rel" "$stage/bin/$name"
      what[bin/$name]=$description
    else
      missing+=("$name")
    fi
  done
  for name in $require; do
    if [[ " ${missing[*]-} " == *" $name "* ]]; then
      problem "required program $name is not built in $build (expected $(printf '%s\n' "${programs[@]}" | awk -F'|' -v n="$name" '$1 == n { print $2 }'))"
    fi
  done

  # MPICH's launcher: mpiexec (hydra) and the proxy it starts from its own folder.
  local hydra
  hydra=$(readlink -f "$(command -v mpiexec.hydra || command -v mpiexec || echo /nonexistent)")
  if [ -x "$hydra" ] && [ -x "$(dirname "$hydra")/hydra_pmi_proxy" ]; then
    cp "$hydra" "$stage/bin/mpiexec"
    cp "$(readlink -f "$(dirname "$hydra")/hydra_pmi_proxy")" "$stage/bin/hydra_pmi_proxy"
    what[bin/mpiexec]="MPICH's mpiexec (hydra) from $hydra: two ranks on the GPU machine"
    what[bin/hydra_pmi_proxy]="MPICH's hydra proxy, which mpiexec starts from its own folder"
  else
    problem "no MPICH mpiexec.hydra with hydra_pmi_proxy beside it found on PATH (Debian: mpich)"
  fi

  # The libraries: every one that ldd lists for a program, but glibc's and the image's.
  local file soname path package
  for file in "$stage/bin"/*; do
    while read -r soname path; do
      from_glibc "$soname" && continue
      from_image "$soname" && continue
      [ -e "$stage/lib/$soname" ] && continue
      if [ "$path" = not ]; then
        problem "$(basename "$file") needs $soname, which is found neither here nor in the image's list"
        continue
      fi
      cp -L "$path" "$stage/lib/$soname"
      package=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
      what[lib/$soname]="shared library from ${package:+Debian package $package, }$(readlink -f "$path")"
    done < <(needed "$file")
  done

  # The data, generated afresh.
  local generated=$stage/generated
  mkdir -p "$generated"
  local generator folder
  for entry in "${datasets[@]}"; do
    IFS='|' read -r name generator folder description <<<"$entry"
    if [ "$generator" = fashion_mnist_subset ]; then
      fashion_mnist_subset "$stage/data/$name" || problem "could not write the Fashion-MNIST subset from $fashion_mnist_root"
      while IFS= read -r -d '' file; do
        what[${file#"$stage"/}]="$description"
      done < <(find "$stage/data/$name" -type f -print0)
      continue
    fi
    if [ ! -x "$build/examples/$generator" ]; then
      problem "no $build/examples/$generator to write the $name data (configure with PTRAIN_BUILD_TESTS=ON)"
      continue
    fi
    [ -d "$generated/$generator" ] ||
      PTRAIN_NUM_THREADS=1 "$build/examples/$generator" "$generated/$generator" >/dev/null ||
      problem "$generator failed"
    if [ -d "$generated/$generator/$folder" ]; then
      cp -r "$generated/$generator/$folder" "$stage/data/$name"
      while IFS= read -r -d '' file; do
        what[${file#"$stage"/}]="$description"
      done < <(find "$stage/data/$name" -type f -print0)
    fi
  done
  rm -rf "$generated"

  # Complete: with only the bundle's lib/ on the loader's path, every dependency of every program
  # and library resolves inside it, to glibc, or is the image's.
  for file in "$stage/bin"/* "$stage/lib"/*; do
    while read -r soname path; do
      from_image "$soname" && continue
      if from_glibc "$soname"; then
        [ "$path" != not ] || problem "$(basename "$file") needs glibc's $soname, not found"
        continue
      fi
      case $path in
        "$stage/lib/"*) ;;
        *) problem "$(basename "$file") needs $soname, which resolves to $path, outside the bundle" ;;
      esac
    done < <(needed "$file" "$stage/lib")
  done
  # Loads: each program starts with the bundle's libraries (and this host's CUDA ones).
  local gpu=0 rc
  nvidia-smi -L >/dev/null 2>&1 && gpu=1
  for file in "$stage/bin"/*; do
    name=$(basename "$file")
    rc=0
    case $name in
      cuda_device_check) [ "$gpu" = 1 ] && continue ;;  # with a GPU it would run every check
      hydra_pmi_proxy) continue ;;                      # no harmless flag; ldd above covers it
    esac
    case $name in
      mpiexec) LD_LIBRARY_PATH=$stage/lib "$file" --version >"$stage/load.out" 2>&1 || rc=$? ;;
      *_cuda) LD_LIBRARY_PATH=$stage/lib "$file" --help >"$stage/load.out" 2>&1 || rc=$? ;;
      *) LD_LIBRARY_PATH=$stage/lib "$file" >"$stage/load.out" 2>&1 || rc=$? ;;
    esac
    if grep -q "error while loading shared libraries\|symbol lookup error\|version .* not found" "$stage/load.out"; then
      problem "$name does not load with the bundle's libraries: $(head -n 1 "$stage/load.out")"
    elif [ "$name" = cuda_device_check ] && ! { [ "$rc" = 2 ] && grep -q "no CUDA device found" "$stage/load.out"; }; then
      problem "cuda_device_check without a GPU: expected exit 2 and 'no CUDA device found', got exit $rc: $(head -n 1 "$stage/load.out")"
    elif [[ $name == *_cuda || $name == mpiexec || $name == cuda_header_checks ]] && [ "$rc" != 0 ]; then
      problem "$name exited $rc when only asked to start: $(head -n 1 "$stage/load.out")"
    fi
  done
  rm -f "$stage/load.out"

  # The manifest: how it was built, what it needs, then a line per file.
  local glibc cache=$build/CMakeCache.txt commit
  glibc=$(find "$stage/bin" "$stage/lib" -type f -exec objdump -T {} + 2>/dev/null | grep -o 'GLIBC_[0-9.]*' |
    sed 's/GLIBC_//' | sort -uV | tail -n 1 || true)  # objdump refuses what is not ELF
  commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  cached() { sed -n "s/^$1:[A-Z]*=//p" "$cache" 2>/dev/null | head -n 1; }
  {
    echo "# ptrain GPU bundle: made by scripts/gpu_bundle.sh, run by scripts/gpu_check.sh (docs/gpu_run.md)"
    echo "# made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on ${HOSTNAME:-$(uname -n)} from commit $commit$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)'), build folder $build"
    echo "# build: CMAKE_BUILD_TYPE=$(cached CMAKE_BUILD_TYPE) CMAKE_CUDA_ARCHITECTURES=$(cached CMAKE_CUDA_ARCHITECTURES) CMAKE_CUDA_FLAGS=$(cached CMAKE_CUDA_FLAGS) CMAKE_CUDA_FLAGS_RELEASE=$(cached CMAKE_CUDA_FLAGS_RELEASE) nvcc $(sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\(.*\)")/\1/p' "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null | head -n 1)"
    echo "# glibc: $glibc (the newest GLIBC_ symbol version a carried file needs)"
    echo "# from the image: $image_libraries"
    echo "# missing: ${missing[*]:-none}"
    echo "# sha256 bytes path what"
    (cd "$stage" && find bin lib data -type f | LC_ALL=C sort) | while read -r file; do
      printf '%s %s %s %s\n' "$(sha256sum "$stage/$file" | cut -d' ' -f1)" "$(stat -c %s "$stage/$file")" "$file" \
        "${what[$file]:-}"
    done
  } >"$stage/MANIFEST.txt"

  # The archive: xz, since the programs and libraries shrink to a fifth (uncompressed they exceed
  # the 64 MiB that travel).
  rm -f "$out/ptrain-gpu.tar.xz" "$out/MANIFEST.txt"
  tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner -cf - MANIFEST.txt bin lib data |
    xz -T0 "-$level" >"$out/ptrain-gpu.tar.xz.part"
  mv "$out/ptrain-gpu.tar.xz.part" "$out/ptrain-gpu.tar.xz"
  local bytes unpacked
  bytes=$(stat -c %s "$out/ptrain-gpu.tar.xz")
  unpacked=$(du -sb "$stage" | cut -f1)
  { cat "$stage/MANIFEST.txt"
    echo "# archive: ptrain-gpu.tar.xz $bytes $(sha256sum "$out/ptrain-gpu.tar.xz" | cut -d' ' -f1)"
  } >"$out/MANIFEST.txt"

  # Small enough: under the limit, and with the tracked files of the working tree (which travel
  # too) under 64 MiB.
  local mib=$((1024 * 1024)) tracked=0 travels
  if [ "$bytes" -gt $((limit_mib * mib)) ]; then
    problem "the archive is $((bytes / mib)) MiB, over the limit of $limit_mib MiB"
  fi
  if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    tracked=$(git -C "$root" ls-files -z | (cd "$root" && xargs -0 stat -c %s 2>/dev/null) | awk '{ s += $1 } END { print s + 0 }' || true)
  fi
  travels=$((bytes + tracked))
  [ "$travels" -le $((64 * mib)) ] ||
    problem "the archive and the working tree's tracked files come to $((travels / mib)) MiB, over the 64 MiB that travel"

  printf 'gpu_bundle: %s: %d files (%d programs, %d libraries), %.1f MiB unpacked, %.1f MiB as ptrain-gpu.tar.xz; with the tracked files %.1f of the 64 MiB that travel\n' \
    "$out" "$(grep -vc '^#' "$stage/MANIFEST.txt")" "$(find "$stage/bin" -type f | wc -l)" \
    "$(find "$stage/lib" -type f | wc -l)" "$(awk -v b="$unpacked" 'BEGIN { print b / 1048576 }')" \
    "$(awk -v b="$bytes" 'BEGIN { print b / 1048576 }')" "$(awk -v b="$travels" 'BEGIN { print b / 1048576 }')"
  echo "gpu_bundle: programs missing: ${missing[*]:-none}; needs glibc $glibc; from the image: $image_libraries"
  if [ ${#problems[@]} -gt 0 ]; then
    echo "gpu_bundle: INCOMPLETE: ${#problems[@]} problem(s), listed above" >&2
    exit 1
  fi
  echo "gpu_bundle: complete"
}

limit_mib=56
level=6
if [ "${1:-}" = --collect-from ]; then
  [ $# -ge 3 ] || usage
  build=$2 out=$3 require=$all_programs
  shift 3
  while [ $# -gt 0 ]; do
    case $1 in
      --require) [ $# -ge 2 ] || usage; require=$2; shift 2 ;;
      --limit-mib) [[ ${2:-} =~ ^[0-9]+$ ]] || usage; limit_mib=$2; shift 2 ;;
      --fast) level=1; shift ;;
      *) usage ;;
    esac
  done
  collect "$build" "$out" "$require" "$limit_mib" "$level"
  exit 0
fi
case ${1:-} in -*) usage ;; esac
[ $# -le 1 ] || usage
out=${1:-gpu-bundle}

# The real bundle: what a user with a GPU builds (Release, -O3), for the H200's sm_90 only, in a
# build folder of its own; only the targets the bundle holds.
. scripts/env.sh
build=${PTRAIN_GPU_BUILD_DIR:-build-gpu}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPTRAIN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real \
  -DCMAKE_CUDA_FLAGS= "-DCMAKE_CUDA_FLAGS_RELEASE=-O3 -DNDEBUG" -DPTRAIN_BUILD_TESTS=ON -DPTRAIN_BUILD_EXAMPLES=ON \
  -DPTRAIN_BUILD_BENCH=ON "-DPTRAIN_CUDA_EXAMPLES=fashion_mnist;resnet_cifar10;imagenet_resnet;transformer_lm"
# shellcheck disable=SC2086,SC2154  # the names are words; jobs comes from env.sh
cmake --build "$build" -j "$jobs" --target $all_programs make_example_data make_wikitext_data
collect "$build" "$out" "$all_programs" "$limit_mib" "$level"
