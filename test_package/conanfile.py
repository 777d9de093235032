# conan create's check of the package: a consumer built through CMakeToolchain/CMakeDeps that
# finds ptrain (and the components the options turned on) and runs.
import os

from conan import ConanFile
from conan.tools.build import can_run
from conan.tools.cmake import CMake, CMakeToolchain, cmake_layout


class PtrainTestConan(ConanFile):
    settings = "os", "arch", "compiler", "build_type"
    generators = "CMakeDeps", "VirtualRunEnv"
    test_type = "explicit"

    def requirements(self):
        self.requires(self.tested_reference_str)

    def layout(self):
        cmake_layout(self)

    def generate(self):
        toolchain = CMakeToolchain(self)
        ptrain = self.dependencies["ptrain"]
        toolchain.cache_variables["PTRAIN_TEST_MPI"] = bool(ptrain.options.with_mpi)
        toolchain.cache_variables["PTRAIN_TEST_IMAGE"] = bool(ptrain.options.with_image)
        toolchain.generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def test(self):
        if not can_run(self):
            return
        folder = self.cpp.build.bindir
        self.run(os.path.join(folder, "test_package"), env="conanrun")
        if self.dependencies["ptrain"].options.with_mpi:
            self.run(f"mpiexec -n 2 {os.path.join(folder, 'test_package_mpi')}", env="conanrun")
