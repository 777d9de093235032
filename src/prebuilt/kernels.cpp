// The prebuilt library's other CPU kernels: normalisation, pooling, losses, softmax, resampling,
// copies and the optimizers' updates (core/prebuilt.hpp says how).
#define PTRAIN_PREBUILT_DEFINE_KERNELS
#include "ptrain/kernels/cpu/batch_norm.hpp"
#include "ptrain/kernels/cpu/copy.hpp"
#include "ptrain/kernels/cpu/cross_entropy.hpp"
#include "ptrain/kernels/cpu/embedding.hpp"
#include "ptrain/kernels/cpu/pool.hpp"
#include "ptrain/kernels/cpu/softmax.hpp"
#include "ptrain/kernels/cpu/upsample.hpp"
#include "ptrain/optim/adam.hpp"
#include "ptrain/optim/sgd.hpp"
