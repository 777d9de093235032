// The prebuilt library's class templates in float and double on the CPU: tensors, autograd's nodes,
// the layers, the optimizers and the data loader of a TensorDataset, as their headers list them
// (core/prebuilt.hpp says how).
#define PTRAIN_PREBUILT_DEFINE_CLASSES
#include "ptrain/nn/embedding.hpp"
#include "ptrain/nn/layer_norm.hpp"
#include "ptrain/nn/transformer.hpp"
#include "ptrain/ptrain.hpp"
