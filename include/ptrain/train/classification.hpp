#pragma once
// Moved to ptrain/tasks/classification.hpp (tasks sit below the policies, which may include them); this path
// forwards to it for one release.
#include "ptrain/tasks/classification.hpp"
