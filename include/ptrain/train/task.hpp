#pragma once
// Moved to ptrain/tasks/task.hpp (tasks sit below the policies, which may include them); this path
// forwards to it for one release.
#include "ptrain/tasks/task.hpp"
