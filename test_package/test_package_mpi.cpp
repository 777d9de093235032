// The MPI component: every rank adds rank + 1 through MpiComm's allreduce.
#include <cstdio>
#include <vector>

#include <ptrain/comm/mpi_comm.hpp>

int main(int argc, char** argv) {
  ptrain::MpiSession session(argc, argv);
  ptrain::MpiComm world(session);
  std::vector<double> values(3, world.rank() + 1.0);
  world.allreduce_sum(values);
  const double want = world.size() * (world.size() + 1) / 2.0;
  const bool ok = values == std::vector<double>(3, want);
  if (world.rank() == 0)
    std::printf("ptrain test_package (MPI, %d ranks): allreduce %s\n", world.size(), ok ? "as expected" : "WRONG");
  return ok ? 0 : 1;
}
