#!/bin/sh
# Usage: trainer_from_library.sh [--also NAME]... OBJECT LOOP COMMAND...
# A Trainer whose policies run on any module (none, DataParallel, Sharded: train/trainer.hpp) runs
# the loop of LOOP, the Trainer of a Module as nm -C spells it (for example
# 'ptrain::Trainer<ptrain::Module<float, ptrain::Cpu>>'), from the prebuilt library: OBJECT (the
# program's object) must leave fit on DataLoaders of a TensorDataset and the constructor for Sgd
# undefined (the library defines them), and each function named by --also (the start of its name
# as nm -C spells it, for example 'ptrain::MpiSession::~MpiSession('), and define no member of the
# loop itself; then COMMAND (the program, or mpiexec running it) must succeed.
set -eu
also=""
while [ "$1" = --also ]; do
  also="$also
$2"
  shift 2
done
object=$1 loop=$2
shift 2
symbols=$(nm -C "$object")
names="std::vector<ptrain::EpochResult, std::allocator<ptrain::EpochResult> > $loop::fit<ptrain::DataLoader<ptrain::TensorDataset>, ptrain::DataLoader<ptrain::TensorDataset> >(
$loop::Trainer<ptrain::Sgd<float, ptrain::Cpu> >($also"
printf '%s\n' "$names" | while IFS= read -r name; do
  [ -n "$name" ] || continue
  if ! printf '%s\n' "$symbols" | grep -F " U $name" >/dev/null; then
    echo "trainer_from_library: $object does not take $name...) from the prebuilt library:" >&2
    printf '%s\n' "$symbols" | grep -F "$name" >&2 || echo "  (not named at all)" >&2
    exit 1
  fi
done
if printf '%s\n' "$symbols" | grep -E ' [TW] ' | grep -F "$loop::" | grep -E '::(fit|train_epoch|train_step)[<(]' >&2; then
  echo "trainer_from_library: $object compiled the loop above itself" >&2
  exit 1
fi
echo "trainer_from_library: fit and the constructor of $loop${also:+ and the functions named by --also} come from the prebuilt library"
"$@"
