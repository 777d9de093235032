#pragma once
// AnyComm: any Communicator behind one type, for the policies whose type must not name the
// communicator (Pipeline<4> takes an MpiComm, a SelfComm or an NcclComm alike). It carries what a
// pipeline needs: rank, size, split, point-to-point messages in the communicator's memory
// (memory_name()), and a sum and an allgather over host doubles.
#include <memory>
#include <span>
#include <utility>
#include <variant>

#include "ptrain/comm/communicator.hpp"
#include "ptrain/comm/host_values.hpp"

namespace ptrain {

// A pending operation of any communicator; wait() blocks until it is complete.
class AnyRequest {
 public:
  AnyRequest() = default;
  template <CommRequest R>
  explicit AnyRequest(R request) : self_(std::make_unique<Holder<R>>(std::move(request))) {}

  void wait() {
    if (self_) self_->wait();
    self_.reset();
  }
  bool test() { return !self_ || self_->test(); }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual void wait() = 0;
    virtual bool test() = 0;
  };
  template <class R>
  struct Holder final : Base {
    explicit Holder(R r) : request(std::move(r)) {}
    void wait() override { request.wait(); }
    bool test() override { return request.test(); }
    R request;
  };
  std::unique_ptr<Base> self_;
};

class AnyComm {
 public:
  using SendBuffer = std::variant<std::span<const float>, std::span<const double>, std::span<const half>,
                                  std::span<const bfloat16>>;
  using RecvBuffer = std::variant<std::span<float>, std::span<double>, std::span<half>, std::span<bfloat16>>;

  // Shares the communicator; it must outlive this AnyComm.
  template <Communicator C>
  static AnyComm borrow(C& comm) {
    return AnyComm(std::make_shared<Holder<C, C*>>(&comm));
  }
  // Takes ownership (a communicator made by split).
  template <Communicator C>
  static AnyComm own(C comm) {
    return AnyComm(std::make_shared<Holder<C, C>>(std::move(comm)));
  }

  int rank() const { return self_->rank(); }
  int size() const { return self_->size(); }
  // The name of the device whose memory the messages' buffers are in (comm_memory_t): "cpu" for
  // host memory, "cuda" for NcclComm's.
  const char* memory_name() const { return self_->memory_name(); }
  AnyComm split(int color, int key) { return self_->split(color, key); }
  template <CommScalar T>
  AnyRequest isend(std::span<const T> buffer, int dest, int tag) {
    return self_->isend(buffer, dest, tag);
  }
  template <CommScalar T>
  AnyRequest irecv(std::span<T> buffer, int source, int tag) {
    return self_->irecv(buffer, source, tag);
  }
  void allreduce_sum(std::span<double> buffer) { self_->allreduce_sum(buffer); }
  void allgather(std::span<const double> in, std::span<double> out) { self_->allgather(in, out); }
  void barrier() { self_->barrier(); }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual const char* memory_name() const = 0;
    virtual AnyComm split(int color, int key) = 0;
    virtual AnyRequest isend(SendBuffer buffer, int dest, int tag) = 0;
    virtual AnyRequest irecv(RecvBuffer buffer, int source, int tag) = 0;
    virtual void allreduce_sum(std::span<double> buffer) = 0;
    virtual void allgather(std::span<const double> in, std::span<double> out) = 0;
    virtual void barrier() = 0;
  };
  // Stored is C (owned) or C* (borrowed).
  template <class C, class Stored>
  struct Holder final : Base {
    explicit Holder(Stored c) : stored(std::move(c)) {}
    C& comm() {
      if constexpr (std::is_pointer_v<Stored>)
        return *stored;
      else
        return stored;
    }
    const C& comm() const { return const_cast<Holder*>(this)->comm(); }
    int rank() const override { return comm().rank(); }
    int size() const override { return comm().size(); }
    const char* memory_name() const override { return comm_memory_t<C>::name; }
    AnyComm split(int color, int key) override { return AnyComm::own(comm().split(color, key)); }
    AnyRequest isend(SendBuffer buffer, int dest, int tag) override {
      return std::visit([&](auto s) { return AnyRequest(comm().isend(s, dest, tag)); }, buffer);
    }
    AnyRequest irecv(RecvBuffer buffer, int source, int tag) override {
      return std::visit([&](auto s) { return AnyRequest(comm().irecv(s, source, tag)); }, buffer);
    }
    void allreduce_sum(std::span<double> buffer) override { host_allreduce_sum(comm(), buffer); }
    void allgather(std::span<const double> in, std::span<double> out) override { host_allgather(comm(), in, out); }
    void barrier() override { comm().barrier(); }
    Stored stored;
  };

  explicit AnyComm(std::shared_ptr<Base> self) : self_(std::move(self)) {}
  std::shared_ptr<Base> self_;
};

}  // namespace ptrain
