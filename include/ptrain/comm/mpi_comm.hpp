#pragma once
// MpiComm: the Communicator (ptrain/comm/communicator.hpp) over MPICH. It owns an MPI_Comm: the
// session's world duplicated (so that ptrain's messages never match the program's own on
// MPI_COMM_WORLD) or a split of another MpiComm, freed by the destructor. Movable, not copyable.
// Errors come back from MPI as ptrain::Error (the communicator returns MPI's error codes instead
// of aborting), except those found while completing a request (MPI_Wait), which MPICH raises on
// MPI_COMM_WORLD and so end the job with MPI's message. A communicator must not outlive its
// MpiSession.
//
// Every wait, blocking calls included (they are the non-blocking call and its wait), runs under a
// watchdog (comm/detail/mpi_watch.hpp): it polls instead of spinning inside MPI, and after
// PTRAIN_COLLECTIVE_TIMEOUT seconds (default 300) ends every rank with the collective's name and
// number and the ranks that have not joined it.
//
// Each collective is also logged (operation, type, count, root or label: comm/detail/
// collective_log.hpp) until check_collectives() compares the ranks' logs: DataParallel does at
// setup, and after every step when PTRAIN_DEBUG_COLLECTIVES=1.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include "ptrain/comm/communicator.hpp"
#include "ptrain/comm/detail/collective_log.hpp"
#include "ptrain/comm/detail/mpi_watch.hpp"
#include "ptrain/comm/detail/same_sequence.hpp"
#include "ptrain/core/error.hpp"
#include "ptrain/launch/mpi_session.hpp"
#include "ptrain/launch/mpi_types.hpp"

namespace ptrain {

// A non-blocking MPI operation in flight: one MPI request, or several for an allreduce that
// was cut into pieces.
class MpiRequest {
 public:
  MpiRequest() = default;  // already complete
  MpiRequest(MpiRequest&& other) noexcept
      : requests_(std::move(other.requests_)),
        receive_(other.receive_),
        watch_(std::move(other.watch_)),
        ticket_(std::move(other.ticket_)) {
    other.requests_.clear();
  }
  MpiRequest& operator=(MpiRequest&& other) noexcept {
    if (this != &other) {
      finish_in_destructor();
      requests_ = std::move(other.requests_);
      other.requests_.clear();
      receive_ = other.receive_;
      watch_ = std::move(other.watch_);
      ticket_ = std::move(other.ticket_);
    }
    return *this;
  }
  ~MpiRequest() { finish_in_destructor(); }

  // Blocks until the operation is complete (under the communicator's watchdog); a no-op once it is.
  void wait() {
    if (requests_.empty()) return;
    MPI_Status status;
    watch_->wait(requests_, &status, ticket_);
    requests_.clear();
    check_received(status);
  }
  // True once the operation is complete; drives MPI's progress either way.
  bool test() {
    if (requests_.empty()) return true;
    int done = 0;
    MPI_Status status;
    if (requests_.size() == 1)
      detail::mpi_check(MPI_Test(requests_.data(), &done, &status), "MPI_Test");
    else
      detail::mpi_check(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE),
                        "MPI_Testall");
    if (!done) return false;
    requests_.clear();
    check_received(status);
    return true;
  }
  bool pending() const { return !requests_.empty(); }

 private:
  friend class MpiComm;
  // A receive must get exactly the elements its buffer holds.
  struct Receive {
    MPI_Datatype type = MPI_DATATYPE_NULL;
    int count = -1;
    int source = 0;
    int tag = 0;
  };

  MPI_Request* add() { return &requests_.emplace_back(MPI_REQUEST_NULL); }
  void check_received(const MPI_Status& status) {
    if (receive_.count < 0) return;
    int count = 0;
    MPI_Get_count(&status, receive_.type, &count);
    const Receive r = std::exchange(receive_, Receive{});
    check(count == r.count, "MpiComm::recv: expected ", r.count, " elements from rank ", r.source, " with tag ",
          r.tag, ", the message held ", count);
  }
  void finish_in_destructor() noexcept {
    if (requests_.empty()) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && std::uncaught_exceptions() == 0) {
      try {
        MPI_Status status;
        watch_->wait(requests_, &status, ticket_);
      } catch (...) {  // an MPI error completing it: nothing is left to wait for
      }
    }
    requests_.clear();
  }

  std::vector<MPI_Request> requests_;
  Receive receive_;
  std::shared_ptr<detail::MpiWatch> watch_;
  detail::WaitTicket ticket_;
};

class MpiComm {
 public:
  using Request = MpiRequest;

  // The session's world: every rank, in MPI_COMM_WORLD's order (collective over the world).
  explicit MpiComm(const MpiSession& session) : types_(&session.wire_types()) {
    MPI_Comm comm = MPI_COMM_NULL;
    detail::mpi_check(MPI_Comm_dup(session.world_handle(), &comm), "MPI_Comm_dup");
    adopt(comm);
  }
  MpiComm(MpiComm&& other) noexcept
      : comm_(std::exchange(other.comm_, MPI_COMM_NULL)),
        types_(other.types_),
        rank_(other.rank_),
        size_(other.size_),
        tag_ub_(other.tag_ub_),
        piece_bytes_(other.piece_bytes_),
        bytes_sent_(other.bytes_sent_),
        watch_(std::move(other.watch_)),
        log_(std::move(other.log_)),
        label_(std::move(other.label_)) {}
  MpiComm& operator=(MpiComm&& other) noexcept {
    if (this != &other) {
      release();
      comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
      types_ = other.types_;
      rank_ = other.rank_;
      size_ = other.size_;
      tag_ub_ = other.tag_ub_;
      piece_bytes_ = other.piece_bytes_;
      bytes_sent_ = other.bytes_sent_;
      watch_ = std::move(other.watch_);
      log_ = std::move(other.log_);
      label_ = std::move(other.label_);
    }
    return *this;
  }
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;
  ~MpiComm() { release(); }

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::uint64_t bytes_sent() const { return bytes_sent_; }
  // The MPI communicator, for raw MPI calls alongside this one.
  MPI_Comm handle() const { return comm_; }

  // A buffer longer than allreduce_piece_bytes() is reduced in pieces, all started at once as
  // non-blocking allreduces and then waited for: each piece stays in cache through MPI's
  // reduce-scatter and allgather (2 ranks, 45 MB: about 0.55 of one MPI_Allreduce's time, see
  // bench/allreduce.cpp), and starting them together avoids one synchronisation per piece
  // (blocking pieces were up to 10x slower when the ranks share busy cores). Every element is
  // still the sum over all ranks, bit for bit the same on each.
  template <MutableCommBuffer B>
  void allreduce_sum(B&& buffer) {
    iallreduce_sum(std::forward<B>(buffer)).wait();
  }
  template <MutableCommBuffer B>
  Request iallreduce_sum(B&& buffer) {
    auto s = as_span(buffer);
    using T = comm_scalar_t<B>;
    const std::size_t piece = piece_elements(sizeof(T));
    Request r = watched<T>("allreduce_sum", s.size());
    r.requests_.reserve((s.size() + piece - 1) / piece);
    for (std::size_t at = 0; at < s.size(); at += piece) {
      const int n = static_cast<int>(std::min(piece, s.size() - at));
      detail::mpi_check(MPI_Iallreduce(MPI_IN_PLACE, s.data() + at, n, type<T>(), types_->sum<T>(), comm_, r.add()),
                        "MPI_Iallreduce");
    }
    bytes_sent_ += s.size_bytes();
    return r;
  }
  // The piece size of allreduce_sum (2 MiB unless set; at least one element).
  std::size_t allreduce_piece_bytes() const { return piece_bytes_; }
  void set_allreduce_piece_bytes(std::size_t bytes) {
    check(bytes > 0, "MpiComm::set_allreduce_piece_bytes: expected a positive byte count");
    piece_bytes_ = bytes;
  }

  template <CommBuffer S, MutableCommBuffer R>
    requires std::same_as<comm_scalar_t<S>, comm_scalar_t<R>>
  void reduce_scatter_sum(S&& send, R&& recv) {
    detail::CommChecks::blocks("reduce_scatter_sum", as_span(send).size(), as_span(recv).size(), size_, false);
    ireduce_scatter_sum(std::forward<S>(send), std::forward<R>(recv)).wait();
  }
  template <CommBuffer S, MutableCommBuffer R>
    requires std::same_as<comm_scalar_t<S>, comm_scalar_t<R>>
  Request ireduce_scatter_sum(S&& send, R&& recv) {
    auto in = as_span(send);
    auto out = as_span(recv);
    using T = comm_scalar_t<R>;
    detail::CommChecks::blocks("ireduce_scatter_sum", in.size(), out.size(), size_, false);
    const int n = count("ireduce_scatter_sum", in.size());
    Request r = watched<T>("reduce_scatter_sum", in.size());
    detail::mpi_check(MPI_Ireduce_scatter_block(in.data(), out.data(), n / size_, type<T>(), types_->sum<T>(), comm_,
                                                r.add()),
                      "MPI_Ireduce_scatter_block");
    bytes_sent_ += in.size_bytes();
    return r;
  }

  template <CommBuffer S, MutableCommBuffer R>
    requires std::same_as<comm_scalar_t<S>, comm_scalar_t<R>>
  void allgather(S&& send, R&& recv) {
    detail::CommChecks::blocks("allgather", as_span(send).size(), as_span(recv).size(), size_, true);
    iallgather(std::forward<S>(send), std::forward<R>(recv)).wait();
  }
  template <CommBuffer S, MutableCommBuffer R>
    requires std::same_as<comm_scalar_t<S>, comm_scalar_t<R>>
  Request iallgather(S&& send, R&& recv) {
    auto in = as_span(send);
    auto out = as_span(recv);
    using T = comm_scalar_t<R>;
    detail::CommChecks::blocks("iallgather", in.size(), out.size(), size_, true);
    const int n = count("iallgather", out.size()) / size_;
    Request r = watched<T>("allgather", in.size());
    detail::mpi_check(MPI_Iallgather(in.data(), n, type<T>(), out.data(), n, type<T>(), comm_, r.add()),
                      "MPI_Iallgather");
    bytes_sent_ += in.size_bytes();
    return r;
  }

  template <MutableCommBuffer B>
  void broadcast(B&& buffer, int root) {
    detail::CommChecks::peer("broadcast", root, size_, "root");
    ibroadcast(std::forward<B>(buffer), root).wait();
  }
  template <MutableCommBuffer B>
  Request ibroadcast(B&& buffer, int root) {
    auto s = as_span(buffer);
    detail::CommChecks::peer("ibroadcast", root, size_, "root");
    const int n = count("ibroadcast", s.size());
    Request r = watched<comm_scalar_t<B>>("broadcast", s.size(), " from rank " + std::to_string(root));
    detail::mpi_check(MPI_Ibcast(s.data(), n, type<comm_scalar_t<B>>(), root, comm_, r.add()), "MPI_Ibcast");
    if (rank_ == root) bytes_sent_ += s.size_bytes();
    return r;
  }

  template <CommBuffer B>
  void send(B&& buffer, int dest, int tag) {
    check_p2p("send", dest, tag, "destination");
    isend(std::forward<B>(buffer), dest, tag).wait();
  }
  template <CommBuffer B>
  Request isend(B&& buffer, int dest, int tag) {
    auto s = as_span(buffer);
    check_p2p("isend", dest, tag, "destination");
    const int n = count("isend", s.size());
    Request r = watched_message<comm_scalar_t<B>>("send of", s.size(), " to", dest, tag);
    detail::mpi_check(MPI_Isend(s.data(), n, type<comm_scalar_t<B>>(), dest, tag, comm_, r.add()), "MPI_Isend");
    bytes_sent_ += s.size_bytes();
    return r;
  }
  // A message shorter than the buffer is a ptrain::Error; a longer one is MPI's truncation
  // error: an Error here, but fatal to the job (with MPI's message) when it completes an irecv,
  // because MPICH raises errors of MPI_Wait on MPI_COMM_WORLD, whose errors abort.
  // recv waits for the message under the watchdog (MPI_Iprobe), then takes it with MPI_Recv.
  template <MutableCommBuffer B>
  void recv(B&& buffer, int source, int tag) {
    auto s = as_span(buffer);
    using T = comm_scalar_t<B>;
    check_p2p("recv", source, tag, "source");
    const int n = count("recv", s.size());
    const Request waiting = watched_message<T>("receive of", s.size(), " from", source, tag);
    watch_->wait_until(
        [&] {
          int arrived = 0;
          detail::mpi_check(MPI_Iprobe(source, tag, comm_, &arrived, MPI_STATUS_IGNORE), "MPI_Iprobe");
          return arrived != 0;
        },
        waiting.ticket_);
    MPI_Status status;
    detail::mpi_check(MPI_Recv(s.data(), n, type<T>(), source, tag, comm_, &status), "MPI_Recv");
    Request done;
    done.receive_ = {type<T>(), n, source, tag};
    done.check_received(status);
  }
  template <MutableCommBuffer B>
  Request irecv(B&& buffer, int source, int tag) {
    auto s = as_span(buffer);
    using T = comm_scalar_t<B>;
    check_p2p("irecv", source, tag, "source");
    const int n = count("irecv", s.size());
    Request r = watched_message<T>("receive of", s.size(), " from", source, tag);
    detail::mpi_check(MPI_Irecv(s.data(), n, type<T>(), source, tag, comm_, r.add()), "MPI_Irecv");
    r.receive_ = {type<T>(), n, source, tag};
    return r;
  }

  void barrier() {
    Request r = watched_collective("barrier");
    detail::mpi_check(MPI_Ibarrier(comm_, r.add()), "MPI_Ibarrier");
    r.wait();
  }

  // Names the next collective in the log and in the watchdog's messages, e.g. "bucket 3".
  void label_next_collective(std::string label) { label_ = std::move(label); }
  // Whether PTRAIN_DEBUG_COLLECTIVES=1 asks for check_collectives() after every training step.
  bool check_collectives_every_step() const { return log_.every_step(); }
  // Compares the collectives every rank started on this communicator since the last check
  // (collective over it): a difference ends in an Error on every rank naming the first collective
  // that differs, as each of two ranks describes it. `where` ("DataParallel step 12") is compared
  // too, so a rank a whole step ahead is found.
  void check_collectives(const std::string& where) {
    std::vector<std::string> entries = log_.take();
    entries.push_back("check at " + where);
    const std::string subject = "MpiComm: the ranks started different collectives (checked at " + where + ")";
    checking_ = true;
    try {
      detail::check_same_sequence(*this, entries,
                                  {subject.c_str(), "no collective (this rank started fewer)",
                                   "; every rank must start the same collectives in the same order"});
    } catch (...) {
      checking_ = false;
      throw;
    }
    checking_ = false;
  }

  // The ranks that pass the same color (>= 0) form a new communicator, ordered by key, then by
  // rank here. Collective over this communicator (numbered "split" for the watchdog). Its byte
  // count starts at zero; it keeps this communicator's allreduce piece size.
  MpiComm split(int color, int key) {
    check(color >= 0, "MpiComm::split: color ", color, " is negative; every rank must join some group");
    // Every rank arrives first at a barrier waited as the others are: MPI_Comm_split blocks,
    // spinning until the last rank comes, which on a node with more ranks than cores took most of a
    // pipeline's start (8 ranks on 2 cores), and a rank that never came hung them; here the wait
    // policy sleeps and the watchdog names that rank. (The new communicator's watchdog duplicates
    // it by MPI_Comm_idup, waited the same way.)
    Request arrived = watched_collective("split");
    detail::mpi_check(MPI_Ibarrier(comm_, arrived.add()), "MPI_Ibarrier");
    arrived.wait();
    MPI_Comm comm = MPI_COMM_NULL;
    detail::mpi_check(MPI_Comm_split(comm_, color, key, &comm), "MPI_Comm_split");
    MpiComm sub(comm, types_);
    sub.piece_bytes_ = piece_bytes_;
    return sub;
  }

 private:
  MpiComm(MPI_Comm owned, const MpiWireTypes* types) : types_(types) { adopt(owned); }

  void adopt(MPI_Comm comm) {
    comm_ = comm;
    detail::mpi_check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    detail::mpi_check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    detail::mpi_check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    int* tag_ub = nullptr;
    int found = 0;
    detail::mpi_check(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
    if (found && tag_ub) tag_ub_ = *tag_ub;
    watch_ = std::make_shared<detail::MpiWatch>(comm_);
  }
  void release() noexcept {
    watch_.reset();
    if (comm_ == MPI_COMM_NULL) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
    comm_ = MPI_COMM_NULL;
  }

  // A request for collective number watch_->start_collective(), described for the watchdog.
  // It is logged, with the label given for it.
  Request watched_collective(std::string what) {
    if (!label_.empty()) what += " (" + std::exchange(label_, {}) + ")";
    Request r;
    r.watch_ = watch_;
    r.ticket_ = {watch_->start_collective(), -1, std::move(what)};
    if (!checking_) log_.record(r.ticket_.collective, r.ticket_.what);
    return r;
  }
  template <class T>
  Request watched(const char* op, std::size_t count, const std::string& detail = {}) {
    return watched_collective(std::string(op) + " of " + std::to_string(count) + " " + comm_scalar_name<T>() + detail);
  }
  template <class T>
  Request watched_message(const char* op, std::size_t count, const char* direction, int peer, int tag) {
    Request r;
    r.watch_ = watch_;
    r.ticket_ = {0, peer,
                 std::string(op) + " " + std::to_string(count) + " " + comm_scalar_name<T>() + direction + " rank " +
                     std::to_string(peer) + " (tag " + std::to_string(tag) + ")"};
    return r;
  }

  std::size_t piece_elements(std::size_t element_bytes) const {
    return std::min<std::size_t>(std::max<std::size_t>(piece_bytes_ / element_bytes, 1), INT_MAX);
  }
  template <class T>
  MPI_Datatype type() const {
    return types_->datatype<T>();
  }
  static int count(const char* op, std::size_t n) {
    check(n <= static_cast<std::size_t>(INT_MAX), "MpiComm::", op, ": ", n,
          " elements exceed MPI's int count; split the buffer");
    return static_cast<int>(n);
  }
  void check_p2p(const char* op, int peer, int tag, const char* role) const {
    detail::CommChecks::peer(op, peer, size_, role);
    detail::CommChecks::tag(op, tag);
    check(tag <= tag_ub_, "MpiComm::", op, ": tag ", tag, " exceeds MPI_TAG_UB (", tag_ub_, ")");
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  const MpiWireTypes* types_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;  // the least MPI guarantees
  std::size_t piece_bytes_ = std::size_t{2} << 20;
  std::uint64_t bytes_sent_ = 0;
  std::shared_ptr<detail::MpiWatch> watch_;  // shared with the requests in flight
  detail::CollectiveLog log_;
  std::string label_;      // of the next collective
  bool checking_ = false;  // check_collectives' own collectives are not logged
};

static_assert(Communicator<MpiComm>, "MpiComm must model Communicator");

}  // namespace ptrain
