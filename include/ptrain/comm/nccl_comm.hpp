#pragma once
// NcclComm: the Communicator concept (comm/communicator.hpp) over NCCL, for buffers in GPU
// memory (std::span over device pointers, or Tensor<T, Cuda>). Built from an MpiComm, which
// carries NCCL's unique id from rank 0 to the others; one GPU per rank (local_cuda_device()).
//
// Collectives run on the communicator's own stream. Each call first makes that stream wait for
// the work already queued on the caller's current (compute) stream, so a gradient bucket is read
// only once backward has written it; a Request's wait() makes the compute stream wait for the
// collective in turn (torch's Work.wait()): work queued afterwards sees the result, and the host
// is not blocked. test() asks whether the GPU has finished. half and bfloat16 travel and add as
// NCCL's own 16-bit types. send/recv match in the order they are issued between two ranks (NCCL
// has no tags; the tag is checked, then ignored). nvcc only, and needs ptrain::mpi.
//
// Where the host does wait (barrier), it polls under the same CollectiveWatchdog as MpiComm
// (comm/collective_watchdog.hpp): after PTRAIN_COLLECTIVE_TIMEOUT seconds it aborts the NCCL
// communicator and ends every rank naming the collective and its number. NCCL cannot be asked
// which ranks have not joined; the MpiComm the program bootstrapped from names them when its own
// collectives stall.
#if !defined(__CUDACC__)
#error "ptrain/comm/nccl_comm.hpp uses CUDA and must be compiled by nvcc (link ptrain::cuda and ptrain::mpi)"
#endif
#include <cstdint>
#include <cstdio>
#include <string>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>

#include <mpi.h>
#include <nccl.h>

#include "ptrain/comm/collective_watchdog.hpp"
#include "ptrain/comm/communicator.hpp"
#include "ptrain/comm/mpi_comm.hpp"
#include "ptrain/device/cuda.hpp"
#include "ptrain/device/cuda_check.hpp"
#include "ptrain/device/cuda_stream.hpp"
#include "ptrain/launch/mpi_abort.hpp"
#include "ptrain/launch/process_info.hpp"

namespace ptrain {

template <class... Parts>
void nccl_check(ncclResult_t status, ncclComm_t comm, Parts&&... call) {
  if (status == ncclSuccess || status == ncclInProgress) return;
  const char* detail = comm ? ncclGetLastError(comm) : "";
  fail(std::forward<Parts>(call)..., " failed: ", ncclGetErrorString(status), detail && *detail ? " (" : "",
       detail ? detail : "", detail && *detail ? ")" : "");
}

template <CommScalar T>
constexpr ncclDataType_t nccl_type() {
  if constexpr (std::is_same_v<T, float>) return ncclFloat32;
  else if constexpr (std::is_same_v<T, double>) return ncclFloat64;
  else if constexpr (std::is_same_v<T, half>) return ncclFloat16;
  else return ncclBfloat16;
}

// This rank's GPU: its rank among the processes of its node, made current. Fails on every rank
// of a node that has more ranks than GPUs, and with "no CUDA device found" without one.
inline int select_local_cuda_device(const ProcessInfo& info) {
  const int devices = require_cuda_device();
  check(info.local_size <= devices, "NCCL needs one GPU per rank: ", info.local_size,
        " ranks run on this node but it has ", devices, " CUDA device", devices == 1 ? "" : "s");
  cuda_check(cudaSetDevice(info.local_rank), "cudaSetDevice(", info.local_rank, ")");
  return info.local_rank;
}

class NcclRequest {
 public:
  NcclRequest() = default;  // already complete
  NcclRequest(std::shared_ptr<cuda::Event> done, cudaStream_t waiter) : done_(std::move(done)), waiter_(waiter) {}
  NcclRequest(NcclRequest&&) noexcept = default;
  NcclRequest& operator=(NcclRequest&& other) noexcept {
    if (this != &other) {
      finish_quietly();
      done_ = std::move(other.done_);
      waiter_ = other.waiter_;
    }
    return *this;
  }
  ~NcclRequest() { finish_quietly(); }

  // Orders the compute stream after the collective.
  void wait() {
    if (!done_) return;
    done_->wait_on(waiter_);
    done_.reset();
  }
  bool test() { return !done_ || done_->done(); }

 private:
  void finish_quietly() noexcept {
    if (done_ && cudaStreamWaitEvent(waiter_, done_->get(), 0) != cudaSuccess) (void)cudaGetLastError();
    done_.reset();
  }
  std::shared_ptr<cuda::Event> done_;
  cudaStream_t waiter_ = nullptr;
};

class NcclComm {
 public:
  using Request = NcclRequest;
  using memory = Cuda;  // buffers in GPU memory (comm_memory_t); host values go through comm/host_values.hpp

  // Collective over mpi: every rank calls it with its own device.
  NcclComm(MpiComm& mpi, int device) : device_(device) {
    cuda_check(cudaSetDevice(device), "cudaSetDevice(", device, ")");
    ncclUniqueId id{};
    if (mpi.rank() == 0) nccl_check(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId");
    detail::mpi_check(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi.handle()), "MPI_Bcast of the NCCL unique id");
    nccl_check(ncclCommInitRank(&comm_, mpi.size(), id, mpi.rank()), nullptr, "ncclCommInitRank (rank ",
               mpi.rank(), " of ", mpi.size(), ", device ", device, ")");
    adopt_sizes();
  }
  NcclComm(NcclComm&& other) noexcept
      : comm_(std::exchange(other.comm_, nullptr)),
        device_(other.device_),
        rank_(other.rank_),
        size_(other.size_),
        bytes_sent_(other.bytes_sent_),
        stream_(std::move(other.stream_)),
        ready_(std::move(other.ready_)),
        scratch_(std::move(other.scratch_)),
        watchdog_(other.watchdog_),
        collectives_waited_(other.collectives_waited_) {}
  NcclComm& operator=(NcclComm&& other) noexcept {
    if (this != &other) {
      release();
      comm_ = std::exchange(other.comm_, nullptr);
      device_ = other.device_;
      rank_ = other.rank_;
      size_ = other.size_;
      bytes_sent_ = other.bytes_sent_;
      stream_ = std::move(other.stream_);
      ready_ = std::move(other.ready_);
      scratch_ = std::move(other.scratch_);
      watchdog_ = other.watchdog_;
      collectives_waited_ = other.collectives_waited_;
    }
    return *this;
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ~NcclComm() { release(); }

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  std::uint64_t bytes_sent() const { return bytes_sent_; }
  cudaStream_t stream() const { return stream_->get(); }

  template <class B>
  void allreduce_sum(B&& buffer) {
    iallreduce_sum(std::forward<B>(buffer)).wait();
  }
  template <class B>
  Request iallreduce_sum(B&& buffer) {
    auto buf = device_span(buffer);
    using T = std::remove_const_t<typename decltype(buf)::element_type>;
    count_bytes(buf.size_bytes());
    return enqueue([&](cudaStream_t s) {
      nccl_check(ncclAllReduce(buf.data(), buf.data(), buf.size(), nccl_type<T>(), ncclSum, comm_, s), comm_,
                 "ncclAllReduce of ", buf.size(), " elements");
    });
  }

  template <class S, class R>
  void reduce_scatter_sum(S&& send, R&& recv) {
    ireduce_scatter_sum(std::forward<S>(send), std::forward<R>(recv)).wait();
  }
  template <class S, class R>
  Request ireduce_scatter_sum(S&& send, R&& recv) {
    auto in = device_span(send);
    auto out = device_span(recv);
    using T = std::remove_const_t<typename decltype(out)::element_type>;
    detail::CommChecks::blocks("reduce_scatter_sum", in.size(), out.size(), size_, false);
    count_bytes(in.size_bytes());
    return enqueue([&](cudaStream_t s) {
      nccl_check(ncclReduceScatter(in.data(), out.data(), out.size(), nccl_type<T>(), ncclSum, comm_, s), comm_,
                 "ncclReduceScatter of ", in.size(), " elements");
    });
  }

  template <class S, class R>
  void allgather(S&& send, R&& recv) {
    iallgather(std::forward<S>(send), std::forward<R>(recv)).wait();
  }
  template <class S, class R>
  Request iallgather(S&& send, R&& recv) {
    auto in = device_span(send);
    auto out = device_span(recv);
    using T = std::remove_const_t<typename decltype(out)::element_type>;
    detail::CommChecks::blocks("allgather", in.size(), out.size(), size_, true);
    count_bytes(in.size_bytes());
    return enqueue([&](cudaStream_t s) {
      nccl_check(ncclAllGather(in.data(), out.data(), in.size(), nccl_type<T>(), comm_, s), comm_, "ncclAllGather of ",
                 in.size(), " elements per rank");
    });
  }

  template <class B>
  void broadcast(B&& buffer, int root) {
    ibroadcast(std::forward<B>(buffer), root).wait();
  }
  template <class B>
  Request ibroadcast(B&& buffer, int root) {
    detail::CommChecks::peer("broadcast", root, size_, "root");
    auto buf = device_span(buffer);
    using T = std::remove_const_t<typename decltype(buf)::element_type>;
    if (rank_ == root) count_bytes(buf.size_bytes());
    return enqueue([&](cudaStream_t s) {
      nccl_check(ncclBroadcast(buf.data(), buf.data(), buf.size(), nccl_type<T>(), root, comm_, s), comm_,
                 "ncclBroadcast of ", buf.size(), " elements from rank ", root);
    });
  }

  template <class B>
  void send(B&& buffer, int dest, int tag) {
    isend(std::forward<B>(buffer), dest, tag).wait();
  }
  template <class B>
  Request isend(B&& buffer, int dest, int tag) {
    detail::CommChecks::peer("send", dest, size_, "destination");
    detail::CommChecks::tag("send", tag);
    auto buf = device_span(buffer);
    using T = std::remove_const_t<typename decltype(buf)::element_type>;
    count_bytes(buf.size_bytes());
    return enqueue([&](cudaStream_t s) {
      nccl_check(ncclSend(buf.data(), buf.size(), nccl_type<T>(), dest, comm_, s), comm_, "ncclSend of ", buf.size(),
                 " elements to rank ", dest);
    });
  }
  template <class B>
  void recv(B&& buffer, int source, int tag) {
    irecv(std::forward<B>(buffer), source, tag).wait();
  }
  template <class B>
  Request irecv(B&& buffer, int source, int tag) {
    detail::CommChecks::peer("recv", source, size_, "source");
    detail::CommChecks::tag("recv", tag);
    auto buf = device_span(buffer);
    using T = std::remove_const_t<typename decltype(buf)::element_type>;
    return enqueue([&](cudaStream_t s) {
      nccl_check(ncclRecv(buf.data(), buf.size(), nccl_type<T>(), source, comm_, s), comm_, "ncclRecv of ",
                 buf.size(), " elements from rank ", source);
    });
  }

  // Returns when every rank has entered it: a one-element allreduce, waited for on the host.
  void barrier() {
    if (!scratch_) scratch_.emplace(Shape{1});
    const std::uint64_t counted = bytes_sent_;
    allreduce_sum(*scratch_);
    bytes_sent_ = counted;
    wait_on_host("barrier");
  }

  NcclComm split(int color, int key) {
    check(color >= 0, "split: color ", color, " is negative");
    ncclComm_t child = nullptr;
    nccl_check(ncclCommSplit(comm_, color, key, &child, nullptr), comm_, "ncclCommSplit (color ", color, ", key ",
               key, ")");
    return NcclComm(child, device_);
  }

 private:
  NcclComm(ncclComm_t adopted, int device) : comm_(adopted), device_(device) { adopt_sizes(); }

  void adopt_sizes() {
    nccl_check(ncclCommUserRank(comm_, &rank_), comm_, "ncclCommUserRank");
    nccl_check(ncclCommCount(comm_, &size_), comm_, "ncclCommCount");
    stream_.emplace();
    ready_.emplace();
  }

  template <class B>
  static auto device_span(B& buffer) {
    if constexpr (requires { buffer.numel(); }) {  // Tensor<T, Cuda>
      using Tensor = std::remove_cvref_t<B>;
      static_assert(std::is_same_v<typename Tensor::device_type, Cuda>, "NcclComm moves tensors in GPU memory");
      return std::span(buffer.data(), static_cast<std::size_t>(buffer.numel()));
    } else {
      return std::span(buffer);
    }
  }

  template <class Call>
  Request enqueue(Call&& call) {
    const cudaStream_t compute = cuda::current_stream();
    ready_->record(compute);
    ready_->wait_on(stream());
    call(stream());
    auto done = std::make_shared<cuda::Event>();
    done->record(stream());
    return Request(std::move(done), compute);
  }

  void count_bytes(std::size_t bytes) { bytes_sent_ += bytes; }

  // Blocks the host until the communicator's stream has run everything queued, polling under the
  // watchdog; NCCL's asynchronous errors (a peer that failed) end the wait as an Error.
  void wait_on_host(const char* what) {
    const std::uint64_t number = ++collectives_waited_;
    watchdog_.wait(
        [&] {
          const cudaError_t status = cudaStreamQuery(stream());
          if (status == cudaErrorNotReady) {
            ncclResult_t async = ncclSuccess;
            nccl_check(ncclCommGetAsyncError(comm_, &async), comm_, "ncclCommGetAsyncError");
            nccl_check(async, comm_, "NCCL (", what, ")");
            return false;
          }
          cuda_check(status, "cudaStreamQuery (", what, ")");
          return true;
        },
        [] {},
        [&] {
          (void)ncclCommAbort(comm_);
          comm_ = nullptr;
          char waited[64];
          std::snprintf(waited, sizeof waited, "%g", watchdog_.timeout_seconds());
          abort_all(std::string("NcclComm: host wait #") + std::to_string(number) + " (" + what +
                    ") on a communicator of " + std::to_string(size_) + " ranks did not complete within " + waited +
                    " s (PTRAIN_COLLECTIVE_TIMEOUT); NCCL cannot say which ranks have not joined it");
        });
  }

  // While an exception unwinds, a peer may never join the collective destroy would wait for.
  void release() noexcept {
    if (!comm_) return;
    if (std::uncaught_exceptions() > 0) (void)ncclCommAbort(comm_);
    else (void)ncclCommDestroy(comm_);
    comm_ = nullptr;
  }

  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  int rank_ = 0;
  int size_ = 1;
  std::uint64_t bytes_sent_ = 0;
  std::optional<cuda::Stream> stream_;
  std::optional<cuda::Event> ready_;
  std::optional<Tensor<float, Cuda>> scratch_;
  CollectiveWatchdog watchdog_;
  std::uint64_t collectives_waited_ = 0;
};

static_assert(Communicator<NcclComm>);
static_assert(std::is_same_v<comm_memory_t<NcclComm>, Cuda>);

}  // namespace ptrain
