#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include <sys/wait.h>

#include <ptrain/io/atomic_file.hpp>

#include "../common/child_process.hpp"
#include "../common/files.hpp"

using namespace ptrain;
namespace fs = std::filesystem;
using test::contains;
using test::temporaries_beside;

BOOST_AUTO_TEST_SUITE(atomic_file_test)

namespace {

const fs::path& dir() { return test::temp_dir("atomic_file_test"); }

void write_text(const fs::path& path, const std::string& text) {
  io::write_atomically(path, [&](std::ostream& out) { out << text; });
}

std::string read_text(const fs::path& path) {
  const test::Bytes bytes = test::read_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace

BOOST_AUTO_TEST_CASE(replaces_the_file_and_leaves_no_temporary) {
  const fs::path path = dir() / "sub" / "log.csv";
  write_text(path, "old\n");
  BOOST_TEST(read_text(path) == "old\n");
  const std::string large(3 << 20, 'x');  // several times the stream's buffer
  write_text(path, large);
  BOOST_TEST(read_text(path) == large);
  BOOST_TEST(temporaries_beside(path).empty());
}

BOOST_AUTO_TEST_CASE(a_writer_that_throws_leaves_the_old_file_and_no_temporary) {
  const fs::path path = dir() / "weights.bin";
  write_text(path, "old");
  BOOST_CHECK_THROW(io::write_atomically(path,
                                         [](std::ostream& out) {
                                           out << std::string(1 << 20, 'y');
                                           throw std::runtime_error("the writer failed");
                                         }),
                    std::runtime_error);
  BOOST_TEST(read_text(path) == "old");
  BOOST_TEST(temporaries_beside(path).empty());
}

BOOST_AUTO_TEST_CASE(a_target_that_cannot_be_created_is_named) {
  const fs::path path = dir() / "not_a_directory";
  write_text(path, "a file");
  const std::string message = test::error_of([&] { write_text(path / "log.csv", "x"); });
  BOOST_TEST(contains(message, (path / "log.csv").string()), message);
}

// The process ends with the signal (as mpiexec or a shell expects) and takes its temporary along.
// A signal this process ignores (SIGINT in a background job, SIGHUP under nohup) cannot end it.
BOOST_AUTO_TEST_CASE(a_signal_mid_write_removes_the_temporary_and_keeps_the_old_file) {
  int tested = 0;
  for (const int signal : {SIGTERM, SIGINT, SIGHUP}) {
    struct sigaction action {};
    ::sigaction(signal, nullptr, &action);
    if (!(action.sa_flags & SA_SIGINFO) && action.sa_handler == SIG_IGN) {
      BOOST_TEST_MESSAGE("signal " << signal << " is ignored by this process: not tested");
      continue;
    }
    ++tested;
    const fs::path path = dir() / ("cache_" + std::to_string(signal) + ".bin");
    write_text(path, "old");
    test::ChildProcess writer([&](auto ready) {
      io::write_atomically(path, [&](std::ostream& out) {
        const std::string chunk(1 << 20, 'z');
        for (int i = 0; i < 4000; ++i) {  // 4 GB at most, 40 s: the signal comes long before
          out << chunk << std::flush;
          if (i == 0) ready();
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      });
    });
    BOOST_REQUIRE(writer.wait_ready(std::chrono::seconds(30)));
    BOOST_REQUIRE_EQUAL(temporaries_beside(path).size(), 1u);
    BOOST_TEST(fs::file_size(temporaries_beside(path).front()) >= (1u << 20));
    const int status = writer.end_with(signal);
    BOOST_TEST(WIFSIGNALED(status));
    BOOST_TEST(WTERMSIG(status) == signal);
    BOOST_TEST(read_text(path) == "old");
    BOOST_TEST(temporaries_beside(path).empty());
  }
  BOOST_TEST(tested >= 1);
}

BOOST_AUTO_TEST_SUITE_END()
