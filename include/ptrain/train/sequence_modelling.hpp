#pragma once
// Moved to ptrain/tasks/sequence_modelling.hpp (tasks sit below the policies, which may include them); this path
// forwards to it for one release.
#include "ptrain/tasks/sequence_modelling.hpp"
