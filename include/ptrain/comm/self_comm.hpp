#pragma once
// SelfComm: the Communicator (ptrain/comm/communicator.hpp) of a world of one, without MPI. Every
// collective is a copy (or nothing); a message sent to oneself is kept until received. Byte
// counts follow the same rule as every communicator, so code tested on SelfComm counts the same.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/comm/communicator.hpp"
#include "ptrain/core/error.hpp"

namespace ptrain {

class SelfComm {
 public:
  // Complete at once, except a receive posted before its message was sent.
  class Request {
   public:
    Request() = default;
    Request(Request&& other) noexcept : poll_(std::exchange(other.poll_, nullptr)) {}
    Request& operator=(Request&& other) noexcept {
      poll_ = std::exchange(other.poll_, nullptr);
      return *this;
    }
    void wait() {
      if (!test()) fail(pending_message_);
    }
    bool test() {
      if (poll_ && poll_()) poll_ = nullptr;
      return !poll_;
    }
    bool pending() const { return poll_ != nullptr; }

   private:
    friend class SelfComm;
    std::function<bool()> poll_;
    std::string pending_message_;
  };

  SelfComm() = default;
  SelfComm(SelfComm&&) noexcept = default;
  SelfComm& operator=(SelfComm&&) noexcept = default;
  SelfComm(const SelfComm&) = delete;
  SelfComm& operator=(const SelfComm&) = delete;

  int rank() const { return 0; }
  int size() const { return 1; }
  std::uint64_t bytes_sent() const { return bytes_sent_; }

  template <MutableCommBuffer B>
  void allreduce_sum(B&& buffer) {
    bytes_sent_ += as_span(buffer).size_bytes();
  }
  template <MutableCommBuffer B>
  Request iallreduce_sum(B&& buffer) {
    allreduce_sum(std::forward<B>(buffer));
    return {};
  }

  template <CommBuffer S, MutableCommBuffer R>
    requires std::same_as<comm_scalar_t<S>, comm_scalar_t<R>>
  void reduce_scatter_sum(S&& send, R&& recv) {
    copy("reduce_scatter_sum", as_span(send), as_span(recv));
  }
  template <CommBuffer S, MutableCommBuffer R>
    requires std::same_as<comm_scalar_t<S>, comm_scalar_t<R>>
  Request ireduce_scatter_sum(S&& send, R&& recv) {
    copy("ireduce_scatter_sum", as_span(send), as_span(recv));
    return {};
  }

  template <CommBuffer S, MutableCommBuffer R>
    requires std::same_as<comm_scalar_t<S>, comm_scalar_t<R>>
  void allgather(S&& send, R&& recv) {
    copy("allgather", as_span(send), as_span(recv));
  }
  template <CommBuffer S, MutableCommBuffer R>
    requires std::same_as<comm_scalar_t<S>, comm_scalar_t<R>>
  Request iallgather(S&& send, R&& recv) {
    copy("iallgather", as_span(send), as_span(recv));
    return {};
  }

  template <MutableCommBuffer B>
  void broadcast(B&& buffer, int root) {
    detail::CommChecks::peer("broadcast", root, 1, "root");
    bytes_sent_ += as_span(buffer).size_bytes();
  }
  template <MutableCommBuffer B>
  Request ibroadcast(B&& buffer, int root) {
    broadcast(std::forward<B>(buffer), root);
    return {};
  }

  template <CommBuffer B>
  void send(B&& buffer, int dest, int tag) {
    auto s = as_span(buffer);
    detail::CommChecks::peer("send", dest, 1, "destination");
    detail::CommChecks::tag("send", tag);
    Message m{tag, scalar_name<comm_scalar_t<B>>, s.size(), std::vector<std::byte>(s.size_bytes())};
    if (!s.empty()) std::memcpy(m.bytes.data(), static_cast<const void*>(s.data()), s.size_bytes());
    mailbox_->push_back(std::move(m));
    bytes_sent_ += s.size_bytes();
  }
  template <CommBuffer B>
  Request isend(B&& buffer, int dest, int tag) {
    send(std::forward<B>(buffer), dest, tag);
    return {};
  }
  template <MutableCommBuffer B>
  void recv(B&& buffer, int source, int tag) {
    irecv(std::forward<B>(buffer), source, tag).wait();
  }
  // The buffer is filled when the message is there: at once, or at a later test() or wait().
  template <MutableCommBuffer B>
  Request irecv(B&& buffer, int source, int tag) {
    auto s = as_span(buffer);
    using T = comm_scalar_t<B>;
    detail::CommChecks::peer("irecv", source, 1, "source");
    detail::CommChecks::tag("irecv", tag);
    Request r;
    r.poll_ = [mailbox = mailbox_, s, tag]() -> bool {
      for (auto it = mailbox->begin(); it != mailbox->end(); ++it) {
        if (it->tag != tag) continue;
        check(it->scalar == std::string(scalar_name<T>) && it->count == s.size(), "SelfComm::recv: expected ",
              s.size(), " ", scalar_name<T>, " elements with tag ", tag, ", the message held ", it->count, " ",
              it->scalar);
        if (!s.empty()) std::memcpy(static_cast<void*>(s.data()), it->bytes.data(), s.size_bytes());
        mailbox->erase(it);
        return true;
      }
      return false;
    };
    r.pending_message_ = "SelfComm::recv: no message with tag " + std::to_string(tag) +
                         " was sent to this rank; in a world of one it would wait forever";
    r.test();
    return r;
  }

  void barrier() {}

  // A world of one again, with its own messages and byte count.
  SelfComm split(int color, int /*key*/) {
    check(color >= 0, "SelfComm::split: color ", color, " is negative; every rank must join some group");
    return SelfComm();
  }

 private:
  struct Message {
    int tag;
    std::string scalar;
    std::size_t count;
    std::vector<std::byte> bytes;
  };

  template <class S, class R>
  void copy(const char* op, S in, R out) {
    check(in.size() == out.size(), op, ": ", in.size(), " elements sent, the receive buffer holds ", out.size(),
          " (a world of one)");
    if (!in.empty() && static_cast<const void*>(in.data()) != static_cast<const void*>(out.data()))
      std::memmove(static_cast<void*>(out.data()), static_cast<const void*>(in.data()), out.size_bytes());
    bytes_sent_ += in.size_bytes();
  }

  std::shared_ptr<std::deque<Message>> mailbox_ = std::make_shared<std::deque<Message>>();
  std::uint64_t bytes_sent_ = 0;
};

static_assert(Communicator<SelfComm>, "SelfComm must model Communicator");

}  // namespace ptrain
