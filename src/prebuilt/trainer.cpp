// The prebuilt library's training loop: Trainer<Module<T, Cpu>> in float and double, which every
// Trainer without policies runs, with the member templates train/trainer.hpp lists (core/prebuilt.hpp
// says how).
#define PTRAIN_PREBUILT_DEFINE_TRAINER
#include "ptrain/train/trainer.hpp"
