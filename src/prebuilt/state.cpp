// The prebuilt library's state files: state dicts, safetensors and the optimizers' checkpoint
// files, in float and double (core/prebuilt.hpp says how).
#define PTRAIN_PREBUILT_DEFINE_STATE
#include "ptrain/io/safetensors.hpp"
#include "ptrain/nn/state_dict.hpp"
#include "ptrain/train/checkpoint.hpp"
