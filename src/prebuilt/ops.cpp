// The prebuilt library's autograd: the float and double ops on the CPU and backward, as
// autograd/ops/*.hpp and autograd/backward.hpp list them, and classification's loss sums and
// metrics (core/prebuilt.hpp says how). The kernels they call are the library's other sources'.
#define PTRAIN_PREBUILT_DEFINE_OPS
#include "ptrain/autograd/backward.hpp"
#include "ptrain/autograd/ops/activation.hpp"
#include "ptrain/autograd/ops/arithmetic.hpp"
#include "ptrain/autograd/ops/attention.hpp"
#include "ptrain/autograd/ops/batch_norm.hpp"
#include "ptrain/autograd/ops/conv.hpp"
#include "ptrain/autograd/ops/dropout.hpp"
#include "ptrain/autograd/ops/layer_norm.hpp"
#include "ptrain/autograd/ops/linear.hpp"
#include "ptrain/autograd/ops/loss.hpp"
#include "ptrain/autograd/ops/narrow.hpp"
#include "ptrain/autograd/ops/pool.hpp"
#include "ptrain/autograd/ops/reduce.hpp"
#include "ptrain/autograd/ops/upsample.hpp"
#include "ptrain/autograd/checkpoint.hpp"
#include "ptrain/tasks/classification.hpp"
#include "ptrain/tasks/metrics.hpp"
#include "ptrain/train/clip_grad_norm.hpp"
#include "ptrain/train/non_finite.hpp"
