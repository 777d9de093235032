// imagenet_resnet compiled by nvcc: --device cuda (the default here) trains on the GPUs; see
// imagenet_resnet.cpp.
#include "imagenet_resnet.cpp"
