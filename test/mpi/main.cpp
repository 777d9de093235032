// Boost.Test under mpiexec: every rank runs every test case inside one MpiSession (run_main),
// writes its log with a "rank R: " prefix on each line (one write per line, so the ranks' lines
// never mix), and all ranks exit with the worst status of any rank: a failure on one rank fails
// the run, and only a failure does.
#include <boost/test/results_reporter.hpp>
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <iostream>
#include <ostream>
#include <streambuf>
#include <string>

#include <ptrain/launch/mpi_main.hpp>

#include "mpi_test_main.hpp"

namespace {

ptrain::MpiSession* current_session = nullptr;
std::ostream* rank_log = nullptr;

// Boost.Test sets its streams up from the command line before calling this: redirect them here.
bool init_unit_test() {
  boost::unit_test::framework::master_test_suite().p_name.value = "ptrain_mpi";
  boost::unit_test::unit_test_log.set_stream(*rank_log);
  boost::unit_test::results_reporter::set_stream(*rank_log);
  return true;
}

class RankPrefixBuffer : public std::streambuf {
 public:
  explicit RankPrefixBuffer(int rank) : prefix_("rank " + std::to_string(rank) + ": ") {}
  ~RankPrefixBuffer() override { flush_line(); }

 protected:
  int_type overflow(int_type c) override {
    if (c == traits_type::eof()) return c;
    line_.push_back(static_cast<char>(c));
    if (c == '\n') flush_line();
    return c;
  }
  int sync() override { return 0; }

 private:
  void flush_line() {
    if (line_.empty()) return;
    const std::string out = prefix_ + line_;
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::write(STDOUT_FILENO, out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    line_.clear();
  }
  std::string prefix_, line_;
};

}  // namespace

namespace ptrain::test {
MpiSession& session() { return *current_session; }
}  // namespace ptrain::test

int main(int argc, char** argv) {
  return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
    current_session = &session;
    RankPrefixBuffer buffer(session.rank());
    std::ostream out(&buffer);
    rank_log = &out;
    const int status = boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
    boost::unit_test::unit_test_log.set_stream(std::cout);
    boost::unit_test::results_reporter::set_stream(std::cerr);
    out.flush();
    rank_log = nullptr;
    int worst = 0;
    MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, session.world_handle());
    if (worst != 0 && status == 0) ptrain::log_line("rank " + std::to_string(session.rank()) + ": passed here, failed on another rank");
    current_session = nullptr;
    return worst;
  });
}
