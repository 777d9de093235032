#!/bin/sh
# Usage: plain_trainer_from_library.sh OBJECT PROGRAM
# A Trainer without policies runs Trainer<Module<float, Cpu>>'s loop from the prebuilt library: the
# object of test/prebuilt/plain_trainer.cpp must leave fit and the Trainer's constructor undefined
# (the library defines them) rather than compile its own; then the program must learn.
set -eu
object=$1 program=$2
symbols=$(nm -C "$object")
for name in \
  'std::vector<ptrain::EpochResult, std::allocator<ptrain::EpochResult> > ptrain::Trainer<ptrain::Module<float, ptrain::Cpu>>::fit<ptrain::DataLoader<ptrain::TensorDataset>, ptrain::DataLoader<ptrain::TensorDataset> >(' \
  'ptrain::Trainer<ptrain::Module<float, ptrain::Cpu>>::Trainer<ptrain::Sgd<float, ptrain::Cpu> >('; do
  if ! printf '%s\n' "$symbols" | grep -F " U $name" >/dev/null; then
    echo "plain_trainer_from_library: $object does not take $name...) from the prebuilt library:" >&2
    printf '%s\n' "$symbols" | grep -F "$name" >&2 || echo "  (not named at all)" >&2
    exit 1
  fi
done
if printf '%s\n' "$symbols" | grep -E ' [TW] .*ptrain::Trainer<ptrain::Module<float, ptrain::Cpu>>::(fit|train_epoch|train_step)' >&2; then
  echo "plain_trainer_from_library: $object compiled the loop above itself" >&2
  exit 1
fi
echo "plain_trainer_from_library: fit and the constructor come from the prebuilt library"
"$program"
