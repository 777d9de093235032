// The prebuilt library's functions that are not templates: the run's logs, the checkpoint files,
// TensorBoard's writer, atomic files, the timeline's trace and the launch environment (their
// headers define them under PTRAIN_PREBUILT_FUNCTION_BODIES; core/prebuilt.hpp says how).
#define PTRAIN_PREBUILT_DEFINE_FUNCTIONS
#include "ptrain/ptrain.hpp"
