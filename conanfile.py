# Conan 2 recipe of ptrain: its prebuilt library (a static library of the float and double CPU
# kernels and autograd ops) or, with header_only=True, the headers alone. The package is ptrain's
# own CMake install (headers, the library, ptrainConfig.cmake with its components): consumers use find_package(ptrain [COMPONENTS ...]) as
# they would without Conan, and the config finds the dependencies CMakeDeps generated (Conan
# Center) or the system's (the Debian profile in conan/profiles/debian12). See docs/install.md.
from conan import ConanFile
from conan.tools.cmake import CMake, CMakeToolchain, cmake_layout
from conan.tools.files import copy, load
import os
import re

required_conan_version = ">=2.0"


class PtrainConan(ConanFile):
    name = "ptrain"
    description = "C++20 parallel training of neural networks, header-only or with a prebuilt library"
    license = "Apache-2.0"
    topics = ("deep-learning", "neural-networks", "mpi", "cuda")
    package_type = "static-library"
    settings = "os", "arch", "compiler", "build_type"
    # MPI and CUDA (with NCCL) are not Conan packages here: the cluster's MPI and the machine's
    # toolkit are found by ptrainConfig.cmake; the options say whether the components exist.
    options = {"header_only": [True, False], "with_blas": [True, False], "with_image": [True, False],
               "with_mpi": [True, False], "with_cuda": [True, False]}
    default_options = {"header_only": False, "with_blas": True, "with_image": True, "with_mpi": True,
                       "with_cuda": False}
    exports_sources = "CMakeLists.txt", "LICENSE", "cmake/*", "include/*", "src/*"
    no_copy_source = True

    # What each option brings: Conan requirements, and the names CMake's find_package knows its
    # dependencies by. with_blas adds to the core component; the others are components of their own.
    _core_requires = ["eigen/[>=3.3 <4]", "zlib/[>=1.2.11 <2]"]
    _option_dependencies = {
        "with_blas": (["openblas/[>=0.3 <1]"], ["BLAS"]),
        "with_image": (["libpng/[>=1.6 <2]", "libjpeg-turbo/[>=2.1 <4]"], ["PNG", "JPEG"]),
        "with_mpi": ([], ["MPI"]),
        "with_cuda": ([], []),  # PTRAIN_CUDA, below
    }

    def set_version(self):
        cmake_lists = load(self, os.path.join(self.recipe_folder, "CMakeLists.txt"))
        self.version = re.search(r"project\(ptrain VERSION ([0-9.]+)", cmake_lists).group(1)

    def _requires(self, option=None):
        if option is None:
            return self._core_requires + (self._requires("with_blas") if self.options.with_blas else [])
        return self._option_dependencies[option][0]

    def requirements(self):
        for option in [None, "with_image", "with_mpi", "with_cuda"]:
            if option is None or self.options.get_safe(option):
                for require in self._requires(option):
                    self.requires(require)

    def configure(self):
        if self.options.header_only:
            self.package_type = "header-library"

    def layout(self):
        cmake_layout(self)

    def package_id(self):
        # Header-only: headers and CMake files, one package for every compiler and build type.
        if self.info.options.header_only:
            self.info.settings.clear()

    def generate(self):
        toolchain = CMakeToolchain(self)
        # The library asks for C++20 itself; CMAKE_CXX_STANDARD from compiler.cppstd would also make
        # CMake before 3.26 fail enable_language(CUDA) with with_cuda (it knows no C++20 flag for nvcc).
        toolchain.blocks.remove("cppstd")
        # The library is built for the profile's CPU, not the building machine's (no -march=native):
        # add -march to the profile's flags for a package of one machine.
        toolchain.cache_variables.update(
            {"PTRAIN_BUILD_TESTS": False, "PTRAIN_BUILD_EXAMPLES": False, "PTRAIN_BUILD_BENCH": False,
             "PTRAIN_BUILD_TOOLS": False, "PTRAIN_NATIVE_ARCH": False,
             "PTRAIN_HEADER_ONLY": bool(self.options.header_only),
             "PTRAIN_CUDA": "ON" if self.options.with_cuda else "OFF"})
        # An option on must find its dependencies (else the build fails); off must not use them.
        for option, (_, packages) in self._option_dependencies.items():
            switch = "REQUIRE" if self.options.get_safe(option) else "DISABLE"
            for package in packages:
                toolchain.cache_variables[f"CMAKE_{switch}_FIND_PACKAGE_{package}"] = True
        # No option brings libsentencepiece yet: the package must not pick up the system's.
        toolchain.cache_variables["CMAKE_DISABLE_FIND_PACKAGE_SentencePiece"] = True
        toolchain.generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        if not self.options.header_only:
            cmake.build()

    def package(self):
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))
        cmake = CMake(self)
        cmake.install()

    def package_info(self):
        # CMake consumers get ptrain's own ptrainConfig.cmake (on CMAKE_PREFIX_PATH through the
        # build dir), not a generated one: the same targets and component checks as a plain install.
        self.cpp_info.set_property("cmake_find_mode", "none")
        # The components, for the other generators (pkg-config, MSBuild, ...).
        def conan_names(requires):
            return [f"{name}::{name}" for name in (require.split("/")[0] for require in requires)]

        core = self.cpp_info.components["core"]
        core.requires = conan_names(self._requires())
        core.defines = ["PTRAIN_HAS_CBLAS"] if self.options.with_blas else []
        if not self.options.header_only:
            core.libs = ["ptrain_prebuilt"]
            core.defines.append("PTRAIN_PREBUILT")
        core.set_property("pkg_config_name", "ptrain")
        core.builddirs = [os.path.join("lib", "cmake", "ptrain")]  # with components, only theirs count
        for component in ("image", "mpi", "cuda"):
            option = f"with_{component}"
            if self.options.get_safe(option):
                info = self.cpp_info.components[component]
                info.requires = ["core"] + conan_names(self._requires(option))
                info.set_property("pkg_config_name", f"ptrain-{component}")
        if self.options.with_image:
            self.cpp_info.components["image"].defines = ["PTRAIN_HAS_IMAGE"]
        if self.options.with_mpi and not self.options.header_only:
            # The library holds the MPI Trainers' loops (the end of ptrain/mpi.hpp) and the MPI
            # headers' functions too (core/prebuilt.hpp).
            self.cpp_info.components["mpi"].defines = ["PTRAIN_PREBUILT_MPI"]
