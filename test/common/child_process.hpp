#pragma once
// A forked child for tests that end a process from outside (a signal mid-write): the child runs
// body(ready), calls ready() once it has reached the point to interrupt, and never returns into
// the test framework.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>

#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

namespace ptrain::test {

class ChildProcess {
 public:
  template <class Body>
  explicit ChildProcess(Body&& body) {
    int fds[2];
    BOOST_REQUIRE(::pipe(fds) == 0);
    pid_ = ::fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(fds[0]);
      const int ready_fd = fds[1];
      int code = 0;
      try {
        body([ready_fd] { (void)!::write(ready_fd, "r", 1); });
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child process: %s\n", e.what());
        code = 3;
      }
      ::_exit(code);
    }
    ::close(fds[1]);
    ready_fd_ = fds[0];
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(ready_fd_);
  }

  // True once the child has called ready(); false if it ended or took longer than `limit`.
  bool wait_ready(std::chrono::milliseconds limit) {
    pollfd ready{ready_fd_, POLLIN, 0};
    char byte = 0;
    return ::poll(&ready, 1, static_cast<int>(limit.count())) == 1 && ::read(ready_fd_, &byte, 1) == 1;
  }

  // Sends `signal` and returns the child's wait status.
  int end_with(int signal) {
    BOOST_REQUIRE(::kill(pid_, signal) == 0);
    int status = 0;
    BOOST_REQUIRE(::waitpid(pid_, &status, 0) == pid_);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int ready_fd_ = -1;
};

}  // namespace ptrain::test
