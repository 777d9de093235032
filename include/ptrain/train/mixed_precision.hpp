#pragma once
// Moved to ptrain/parallel/mixed_precision.hpp (beside the other Trainer policies); this path forwards to it
// for one release.
#include "ptrain/parallel/mixed_precision.hpp"
