// The prebuilt library's models and their blocks in float and double on the CPU, as models/*.hpp
// list them (core/prebuilt.hpp says how).
#define PTRAIN_PREBUILT_DEFINE_MODELS
#include "ptrain/models/albert.hpp"
#include "ptrain/models/transformer_lm.hpp"
#include "ptrain/ptrain.hpp"
