// The failure drill: `abort_on_throw R` throws on rank R (after all ranks did an allreduce, with
// a receive pending that no one will ever satisfy) while every other rank waits in a barrier the
// thrower never joins. run_main must end all ranks with rank R's message and a non-zero exit.
// `abort_on_throw -1` throws nowhere and must exit 0. Checked by expect_abort.cmake.
#include <cstdlib>
#include <string>
#include <vector>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/core/log.hpp>
#include <ptrain/launch/mpi_main.hpp>

int main(int argc, char** argv) {
  const int thrower = argc > 1 ? std::atoi(argv[1]) : -1;
  return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
    ptrain::MpiComm world(session);
    std::vector<float> x(1000, 1.0f);
    world.allreduce_sum(x);
    if (session.rank() == thrower) {
      std::vector<float> never(4);
      auto pending = world.irecv(never, (thrower + 1) % world.size(), 99);
      throw ptrain::Error("deliberate failure on rank " + std::to_string(thrower));
    }
    world.barrier();
    world.allreduce_sum(x);
    ptrain::log_line("rank " + std::to_string(session.rank()) + ": finished");
  });
}
