// The stall drills: `collective_stall MODE R` runs four allreduces on every rank, except that
//   stop R   rank R stops itself (SIGSTOP) before the third, as a rank stuck in a debugger or a deadlock
//   skip R   rank R skips the second and finishes: the others wait in their fourth
//   kill R   rank R is killed (SIGKILL) before the third
//   split R  as stop R, on a communicator whose ranks are the world's in reverse order
//   stop_before_split R  rank R stops itself before the split
//   none     every rank finishes
// The split is the world's collective #1, so the world's allreduces are #2 to #5.
// With PTRAIN_COLLECTIVE_TIMEOUT a few seconds, the watchdog must end every rank naming the
// collective, its number and rank R (stop, skip); under ptrain_rank_guard the killed rank is named
// (kill). Checked by expect_stall.cmake. With STALL_MARKER set (sample_cpu.sh), rank R creates that
// file as the stall begins: the other ranks' CPU time is sampled from then on.
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/core/log.hpp>
#include <ptrain/launch/mpi_main.hpp>

namespace {

void mark_stall() {
  if (const char* path = std::getenv("STALL_MARKER")) std::ofstream(path) << "stalled\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "none";
  const int culprit = argc > 2 ? std::atoi(argv[2]) : -1;
  return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
    ptrain::MpiComm world(session);
    const bool me = session.rank() == culprit;
    if (me && mode == "stop_before_split") {
      mark_stall();
      std::raise(SIGSTOP);
    }
    ptrain::MpiComm reversed = world.split(0, world.size() - world.rank());
    ptrain::MpiComm& comm = mode == "split" ? reversed : world;
    std::vector<float> x(1000, 1.0f);
    for (int i = 1; i <= 4; ++i) {
      if (me && i == 2 && mode == "skip") continue;
      if (me && i == 3 && (mode == "stop" || mode == "split" || mode == "kill")) mark_stall();
      if (me && i == 3 && (mode == "stop" || mode == "split")) std::raise(SIGSTOP);
      if (me && i == 3 && mode == "kill") std::raise(SIGKILL);
      comm.allreduce_sum(x);
    }
    const bool skipped = me && mode == "skip";
    if (skipped) mark_stall();  // the others now wait in their fourth
    ptrain::log_line("rank " + std::to_string(session.rank()) + (skipped ? ": left having skipped a collective" : ": finished"));
  });
}
