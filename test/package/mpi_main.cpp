// Linking ptrain::mpi brings MPI: every rank contributes its rank + 1 to an allreduce.
#include <cstdint>
#include <cstdio>

#include <mpi.h>
#include <ptrain/ptrain.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto t = ptrain::Tensor<double>::full({4}, rank + 1.0);
  auto sum = ptrain::Tensor<double>::zeros({4});
  MPI_Allreduce(t.data(), sum.data(), 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double want = size * (size + 1) / 2.0;
  int ok = 1;
  for (std::int64_t i = 0; i < 4; ++i) ok = ok && sum[i] == want;
  if (rank == 0) std::printf("package consumer (MPI, %d ranks): allreduce %s\n", size, ok ? "as expected" : "WRONG");
  MPI_Finalize();
  return ok ? 0 : 1;
}
