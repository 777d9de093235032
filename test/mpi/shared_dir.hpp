#pragma once
// A directory every rank names alike (rank 0's pid), removed by rank 0 at the end of the test.
#include <filesystem>
#include <span>
#include <string>
#include <system_error>

#include <unistd.h>

#include <ptrain/comm/mpi_comm.hpp>

namespace ptrain::test {

struct SharedDir {
  MpiComm& world;
  std::filesystem::path path;
  SharedDir(MpiComm& comm, const std::string& name) : world(comm) {
    double pid = static_cast<double>(::getpid());
    world.broadcast(std::span<double>(&pid, 1), 0);
    path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(static_cast<long>(pid)));
  }
  ~SharedDir() {
    world.barrier();
    std::error_code ignored;
    if (world.rank() == 0) std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace ptrain::test
