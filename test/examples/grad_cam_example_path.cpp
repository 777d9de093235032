// examples/grad_cam's path as CMake configured it (PTRAIN_GRAD_CAM_EXAMPLE, examples/CMakeLists.txt):
// the one object that holds it, so that test_examples' unity batches hold no absolute path and the
// compiler cache (with base_dir, scripts/env.sh) serves them to a clone in another folder.
namespace ptrain::test {

const char* grad_cam_example() { return PTRAIN_GRAD_CAM_EXAMPLE; }

}  // namespace ptrain::test
