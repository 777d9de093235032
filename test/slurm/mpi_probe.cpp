// The program test/slurm runs under srun, sbatch and across the namespace "hosts": every rank
// prints where it runs, then checks an allreduce of a known vector; rank 0 prints the line the
// scripts look for, e.g.
//   mpi_probe: OK size=2 hosts=2 ips=2 allreduce=524288 doubles
// and the exit status is 0 only when every rank got the exact sums.
// Usage: mpi_probe [--count N]   (N doubles in the allreduce, default 524288 = 4 MiB)
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <set>
#include <string>
#include <vector>

#include <mpi.h>
#include <ptrain/core/error.hpp>
#include <ptrain/tensor/tensor.hpp>

namespace {

constexpr int name_chars = 64;

std::string host_name() {
  char name[name_chars] = {};
  ptrain::check(gethostname(name, sizeof name - 1) == 0, "mpi_probe: gethostname failed: ", std::strerror(errno));
  return name;
}

// The IPv4 address of the first interface that is up and not loopback: eth0 on a real host,
// mpi0 inside a test/slurm network namespace.
std::string primary_ip() {
  ifaddrs* list = nullptr;
  ptrain::check(getifaddrs(&list) == 0, "mpi_probe: getifaddrs failed: ", std::strerror(errno));
  std::string ip = "none";
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    ip = std::string(text) + "(" + a->ifa_name + ")";
    break;
  }
  freeifaddrs(list);
  return ip;
}

std::int64_t parse_count(int argc, char** argv) {
  std::int64_t count = 524288;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    ptrain::check(arg == "--count" && i + 1 < argc, "mpi_probe: unknown argument '", arg,
                  "' (expected: --count N)");
    char* end = nullptr;
    count = std::strtoll(argv[++i], &end, 10);
    ptrain::check(*end == '\0' && count > 0 && count <= (1 << 28), "mpi_probe: --count '", argv[i],
                  "' is not a positive element count up to 2^28");
  }
  return count;
}

// Names as fixed-width records, gathered on rank 0.
std::vector<std::string> gather_names(const std::string& mine, int rank, int size) {
  char record[name_chars] = {};
  std::strncpy(record, mine.c_str(), name_chars - 1);
  std::vector<char> all(rank == 0 ? static_cast<std::size_t>(size) * name_chars : 0);
  MPI_Gather(record, name_chars, MPI_CHAR, all.data(), name_chars, MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> names;
  for (int r = 0; rank == 0 && r < size; ++r) names.emplace_back(all.data() + r * name_chars);
  return names;
}

int run(int argc, char** argv) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::int64_t count = parse_count(argc, argv);
  const std::string host = host_name(), ip = primary_ip();
  std::printf("mpi_probe: rank=%d size=%d host=%s ip=%s\n", rank, size, host.c_str(), ip.c_str());
  std::fflush(stdout);

  // Rank r contributes (r + 1) * (i % 1000 + 1): every sum is an exact small integer.
  auto mine = ptrain::Tensor<double>::zeros({count});
  auto sum = ptrain::Tensor<double>::zeros({count});
  for (std::int64_t i = 0; i < count; ++i) mine.data()[i] = (rank + 1.0) * static_cast<double>(i % 1000 + 1);
  MPI_Allreduce(mine.data(), sum.data(), static_cast<int>(count), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double ranks_sum = size * (size + 1) / 2.0;
  std::int64_t wrong = 0, first_wrong = -1;
  for (std::int64_t i = 0; i < count; ++i) {
    if (sum.data()[i] != ranks_sum * static_cast<double>(i % 1000 + 1)) {
      if (wrong++ == 0) first_wrong = i;
    }
  }
  if (wrong != 0) {
    std::printf("mpi_probe: rank %d: allreduce wrong at %lld of %lld elements, first at %lld: %g, expected %g\n",
                rank, static_cast<long long>(wrong), static_cast<long long>(count),
                static_cast<long long>(first_wrong), sum.data()[first_wrong],
                ranks_sum * static_cast<double>(first_wrong % 1000 + 1));
  }
  std::int64_t wrong_total = 0;
  MPI_Reduce(&wrong, &wrong_total, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);

  const auto hosts = gather_names(host, rank, size);
  const auto ips = gather_names(ip, rank, size);
  if (rank != 0) return 0;
  const std::set<std::string> distinct_hosts(hosts.begin(), hosts.end()), distinct_ips(ips.begin(), ips.end());
  std::printf("mpi_probe: %s size=%d hosts=%zu ips=%zu allreduce=%lld doubles\n", wrong_total == 0 ? "OK" : "FAILED",
              size, distinct_hosts.size(), distinct_ips.size(), static_cast<long long>(count));
  std::fflush(stdout);
  return wrong_total == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 1;
  try {
    status = run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  // Rank 0 alone knows the verdict: it decides every rank's exit status.
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}
