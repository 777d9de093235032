#pragma once
// MpiWatch: the watchdog of one MpiComm (comm/collective_watchdog.hpp) and what it says when a
// wait expires. Every collective gets a number (1, 2, ... in the order this rank started them on
// the communicator); every wait is a polled MPI_Test under the watchdog. When one expires, the
// rank asks every other rank, over a duplicate of the communicator kept for these questions, what
// it is doing; ranks that are themselves waiting in ptrain answer from their poll loop with the
// number of collectives they have started and what they wait for. After a short grace the rank
// names the collective, its number and the ranks that have not joined it (no answer: stopped,
// dead or busy elsewhere; or an earlier collective), and ends every rank (abort_all).
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <mpi.h>

#include "ptrain/comm/collective_watchdog.hpp"
#include "ptrain/comm/wait_policy.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/device/threads.hpp"
#include "ptrain/launch/mpi_abort.hpp"
#include "ptrain/launch/mpi_types.hpp"

namespace ptrain::detail {

// What a rank waits for: collective number `collective` (0 for a point-to-point message, which
// waits on `peer`), described as e.g. "allreduce_sum of 1000 float".
struct WaitTicket {
  std::uint64_t collective = 0;
  int peer = -1;
  std::string what;
};

class MpiWatch {
 public:
  // Collective over comm: duplicates it for the questions.
  explicit MpiWatch(MPI_Comm comm);
  ~MpiWatch();
  MpiWatch(const MpiWatch&) = delete;
  MpiWatch& operator=(const MpiWatch&) = delete;

  // The number of the collective this rank starts now.
  std::uint64_t start_collective() { return ++started_; }
  std::uint64_t started() const { return started_; }
  double timeout_seconds() const { return dog_.timeout_seconds(); }

  // MPI_Waitall (MPI_Wait with status when there is one request) under the watchdog.
  void wait(std::span<MPI_Request> requests, MPI_Status* status, const WaitTicket& ticket);
  // Polls done() (an MPI_Test, MPI_Iprobe) under the watchdog.
  template <class Done>
  void wait_until(Done&& done, const WaitTicket& ticket) {
    const WaitTicket* outer = std::exchange(waiting_, &ticket);
    poll(done, [&] { answer_questions(); }, [&] { report_stall(ticket); });
    waiting_ = outer;
  }
  WaitPolicy wait_policy() const { return policy_; }

 private:
  static constexpr int question_tag = 1, answer_tag = 2;
  // The watchdog's wait on done(), polled as the policy says: in a spin, or with sleeps between.
  template <class Done, class Idle, class Expired>
  void poll(Done& done, Idle&& idle, Expired&& expired) {
    if (policy_ == WaitPolicy::passive)
      dog_.wait(detail::PassivePoll(done), idle, expired);
    else
      dog_.wait(done, idle, expired);
  }
  struct Answer {
    std::int64_t started = 0;
    char what[200] = {};
  };

  // The ranks on this node: the launcher's count of them where it gives one (MPICH's hydra, Open
  // MPI), else this communicator's ranks that share memory with this one. Only without the launcher's
  // count is MPI asked: MPI_Comm_split_type is a blocking collective whose busy wait, on a node with
  // more ranks than cores, took most of the CPU time of a suite of 8-rank pipeline tests on 2 cores
  // (a communicator's ranks on the node are among the launcher's, so its count is never less).
  static int ranks_on_this_node(MPI_Comm comm);

  // Another rank's wait expired: tell it how far this rank got and what it waits for.
  void answer_questions();

  // "2", or "2 (world rank 5)" on a communicator whose ranks are not the world's.
  std::string name_rank(int q) const;

  static std::string describe(const WaitTicket& t);

  [[noreturn]] void report_stall(const WaitTicket& ticket);

  CollectiveWatchdog dog_;
  WaitPolicy policy_ = WaitPolicy::active;
  MPI_Comm questions_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::uint64_t started_ = 0;
  const WaitTicket* waiting_ = nullptr;
  std::vector<int> world_ranks_;  // of each rank here
  bool is_world_ = true;          // the ranks are the world's, in its order
};

#if PTRAIN_PREBUILT_MPI_FUNCTION_BODIES
PTRAIN_PREBUILT_MPI_INLINE MpiWatch::MpiWatch(MPI_Comm comm) : dog_(collective_timeout_seconds()) {
  policy_ = wait_policy_for(std::getenv("PTRAIN_WAIT_POLICY"), ranks_on_this_node(comm), num_threads(), usable_cores());
  // MPI_Comm_idup waited as the policy says: MPI_Comm_dup blocks, spinning, which on a node with
  // more ranks than cores kept the cores from the ranks it waited for.
  MPI_Request dup = MPI_REQUEST_NULL;
  mpi_check(MPI_Comm_idup(comm, &questions_, &dup), "MPI_Comm_idup (collective watchdog)");
  auto duplicated = [&] {
    int flag = 0;
    mpi_check(MPI_Test(&dup, &flag, MPI_STATUS_IGNORE), "MPI_Test (MPI_Comm_idup)");
    return flag != 0;
  };
  auto expired = [&] {
    fail("MpiWatch: duplicating a communicator (collective over its ranks) did not complete within ",
         dog_.timeout_seconds(), " s (PTRAIN_COLLECTIVE_TIMEOUT): a rank has not come");
  };
  poll(duplicated, [] {}, expired);
  mpi_check(MPI_Comm_set_errhandler(questions_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  MPI_Comm_rank(questions_, &rank_);
  MPI_Comm_size(questions_, &size_);
  // The ranks of MPI_COMM_WORLD, for messages about a split communicator.
  std::vector<int> ranks(static_cast<std::size_t>(size_));
  for (int q = 0; q < size_; ++q) ranks[static_cast<std::size_t>(q)] = q;
  world_ranks_.assign(ranks.size(), MPI_UNDEFINED);
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  if (MPI_Comm_group(questions_, &group) == MPI_SUCCESS && MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS)
    MPI_Group_translate_ranks(group, size_, ranks.data(), world, world_ranks_.data());
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  is_world_ = world_size == size_;
  for (int q = 0; q < size_; ++q) is_world_ = is_world_ && world_ranks_[static_cast<std::size_t>(q)] == q;
}

PTRAIN_PREBUILT_MPI_INLINE MpiWatch::~MpiWatch() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && questions_ != MPI_COMM_NULL) MPI_Comm_free(&questions_);
}

PTRAIN_PREBUILT_MPI_INLINE void MpiWatch::wait(std::span<MPI_Request> requests, MPI_Status* status,
                                              const WaitTicket& ticket) {
  wait_until(
      [&] {
        int flag = 0;
        if (requests.size() == 1)
          mpi_check(MPI_Test(requests.data(), &flag, status), "MPI_Test");
        else
          mpi_check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag, MPI_STATUSES_IGNORE),
                    "MPI_Testall");
        return flag != 0;
      },
      ticket);
}

PTRAIN_PREBUILT_MPI_INLINE int MpiWatch::ranks_on_this_node(MPI_Comm comm) {
  for (const char* name : {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"})
    if (const char* text = std::getenv(name); text && std::atoi(text) > 0) return std::atoi(text);
  int local = 1;
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
      node != MPI_COMM_NULL) {
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
  }
  return local;
}

PTRAIN_PREBUILT_MPI_INLINE void MpiWatch::answer_questions() {
  for (;;) {
    int pending = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, question_tag, questions_, &pending, &status) != MPI_SUCCESS || !pending) return;
    std::int64_t asked = 0;
    MPI_Recv(&asked, 1, MPI_INT64_T, status.MPI_SOURCE, question_tag, questions_, MPI_STATUS_IGNORE);
    Answer answer;
    answer.started = static_cast<std::int64_t>(started_);
    const std::string what = waiting_ ? describe(*waiting_) : std::string("nothing");
    std::strncpy(answer.what, what.c_str(), sizeof answer.what - 1);
    // Buffered: the asker may already be gone when this would complete.
    MPI_Request request;
    if (MPI_Isend(&answer, sizeof answer, MPI_BYTE, status.MPI_SOURCE, answer_tag, questions_, &request) ==
        MPI_SUCCESS) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      int sent = 0;
      while (!sent && std::chrono::steady_clock::now() < until)
        if (MPI_Test(&request, &sent, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      if (!sent) MPI_Request_free(&request);
    }
  }
}

PTRAIN_PREBUILT_MPI_INLINE std::string MpiWatch::name_rank(int q) const {
  const int w = world_ranks_[static_cast<std::size_t>(q)];
  return std::to_string(q) + (is_world_ || w == MPI_UNDEFINED ? "" : " (world rank " + std::to_string(w) + ")");
}

PTRAIN_PREBUILT_MPI_INLINE std::string MpiWatch::describe(const WaitTicket& t) {
  return t.collective ? "collective #" + std::to_string(t.collective) + " " + t.what : t.what;
}

PTRAIN_PREBUILT_MPI_INLINE void MpiWatch::report_stall(const WaitTicket& ticket) {
  const std::int64_t asked = static_cast<std::int64_t>(ticket.collective);
  std::vector<MPI_Request> questions;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    MPI_Request r;
    if (MPI_Isend(&asked, 1, MPI_INT64_T, q, question_tag, questions_, &r) == MPI_SUCCESS) questions.push_back(r);
  }
  std::vector<Answer> answers(static_cast<std::size_t>(size_));
  std::vector<bool> answered(static_cast<std::size_t>(size_), false);
  answered[static_cast<std::size_t>(rank_)] = true;
  int missing = size_ - 1;
  const auto grace = std::chrono::milliseconds(1000);
  const auto until = std::chrono::steady_clock::now() + grace;
  while (missing > 0 && std::chrono::steady_clock::now() < until) {
    answer_questions();  // the other waiting ranks ask too
    int pending = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, answer_tag, questions_, &pending, &status) == MPI_SUCCESS && pending) {
      const auto q = static_cast<std::size_t>(status.MPI_SOURCE);
      MPI_Recv(&answers[q], sizeof(Answer), MPI_BYTE, status.MPI_SOURCE, answer_tag, questions_, MPI_STATUS_IGNORE);
      if (!answered[q]) --missing;
      answered[q] = true;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (auto& r : questions) MPI_Request_free(&r);

  char waited[64];
  std::snprintf(waited, sizeof waited, "%g", dog_.timeout_seconds());
  std::string message = describe(ticket) + " on a communicator of " + std::to_string(size_) +
                        " ranks did not complete within " + waited + " s (PTRAIN_COLLECTIVE_TIMEOUT)";
  std::string behind, states;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    const auto& a = answers[static_cast<std::size_t>(q)];
    const bool joined = answered[static_cast<std::size_t>(q)] &&
                        (ticket.collective == 0 || static_cast<std::uint64_t>(a.started) >= ticket.collective);
    const bool counts = ticket.collective != 0 || q == ticket.peer;
    if (!joined && counts) behind += (behind.empty() ? "" : ", ") + name_rank(q);
    states += "; rank " + name_rank(q) + ": ";
    if (!answered[static_cast<std::size_t>(q)])
      states += "no answer within 1 s (stopped, dead, or busy outside ptrain's collectives)";
    else
      states += "has started " + std::to_string(a.started) + " collectives, waits in " + std::string(a.what);
  }
  if (ticket.collective != 0)
    message += behind.empty() ? ": every rank has joined it (a collective with different sizes on some rank?)"
                              : ": ranks that have not joined it: " + behind;
  abort_all(message + states, 1);
}
#endif

}  // namespace ptrain::detail
