#pragma once
// Moved to ptrain/parallel/loss_scaler.hpp (beside the other Trainer policies); this path forwards to it
// for one release.
#include "ptrain/parallel/loss_scaler.hpp"
