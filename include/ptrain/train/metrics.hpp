#pragma once
// Moved to ptrain/tasks/metrics.hpp (tasks sit below the policies, which may include them); this path
// forwards to it for one release.
#include "ptrain/tasks/metrics.hpp"
