#pragma once
// Moved to ptrain/tasks/multi_head.hpp (tasks sit below the policies, which may include them); this path
// forwards to it for one release.
#include "ptrain/tasks/multi_head.hpp"
