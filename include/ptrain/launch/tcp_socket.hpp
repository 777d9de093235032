#pragma once
// TCP for the launch rendezvous (url_rendezvous.hpp): an owned socket that exchanges text lines,
// a listener on every IPv4 interface, and a connect that retries until a deadline (the other
// side may not be listening yet).
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "ptrain/core/error.hpp"

namespace ptrain::detail {

using LaunchClock = std::chrono::steady_clock;

class LineSocket {
 public:
  LineSocket() = default;
  explicit LineSocket(int fd) : fd_(fd) {}
  ~LineSocket() { close(); }
  LineSocket(LineSocket&& other) noexcept : fd_(std::exchange(other.fd_, -1)), buffer_(std::move(other.buffer_)) {}
  LineSocket& operator=(LineSocket&& other) noexcept {
    if (this != &other) {
      close();
      fd_ = std::exchange(other.fd_, -1);
      buffer_ = std::move(other.buffer_);
    }
    return *this;
  }
  LineSocket(const LineSocket&) = delete;
  LineSocket& operator=(const LineSocket&) = delete;

  int fd() const { return fd_; }
  bool is_open() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Ends both directions; a thread blocked in read_line on this socket returns.
  void shut_down() const {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }

  // line and a '\n'; false when the connection is broken.
  bool send_line(std::string_view line) const {
    std::string text(line);
    text.push_back('\n');
    std::size_t at = 0;
    while (at < text.size()) {
      const ssize_t sent = ::send(fd_, text.data() + at, text.size() - at, MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR) continue;
      if (sent <= 0) return false;
      at += static_cast<std::size_t>(sent);
    }
    return true;
  }
  // One read of what has arrived into the buffer; false at the end of the stream or on an error.
  bool receive() {
    char chunk[4096];
    for (;;) {
      const ssize_t got = ::recv(fd_, chunk, sizeof chunk, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      buffer_.append(chunk, static_cast<std::size_t>(got));
      return true;
    }
  }
  // The next complete line already received, without its '\n'.
  std::optional<std::string> next_line() {
    const std::size_t end = buffer_.find('\n');
    if (end == std::string::npos) return std::nullopt;
    std::string line = buffer_.substr(0, end);
    buffer_.erase(0, end + 1);
    return line;
  }
  // Blocks for the next line; nullopt at the end of the stream, or when the deadline passes.
  std::optional<std::string> read_line(std::optional<LaunchClock::time_point> deadline = std::nullopt) {
    for (;;) {
      if (auto line = next_line()) return line;
      if (deadline) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - LaunchClock::now());
        pollfd p{fd_, POLLIN, 0};
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) return std::nullopt;
      }
      if (!receive()) return std::nullopt;
    }
  }

 private:
  int fd_ = -1;
  std::string buffer_;
};

// errno's text, read before anything else can change errno (check's arguments are evaluated in
// an unspecified order, so strerror(errno) cannot sit next to the call that failed).
inline std::string last_error_text(bool failed) { return failed ? std::strerror(errno) : std::string(); }

inline LineSocket listen_on_port(int port) {
  LineSocket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const std::string socket_error = last_error_text(!socket.is_open());
  check(socket.is_open(), "launch: socket() failed: ", socket_error);
  const int one = 1;
  ::setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool bound = ::bind(socket.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  const std::string bind_error = last_error_text(!bound);
  check(bound, "launch: rank 0 cannot listen on TCP port ", port, ": ", bind_error,
        " (another program or run holds it? choose another port)");
  const bool listening = ::listen(socket.fd(), 128) == 0;
  const std::string listen_error = last_error_text(!listening);
  check(listening, "launch: listen() on TCP port ", port, " failed: ", listen_error);
  return socket;
}

inline LineSocket accept_connection(const LineSocket& listener) {
  for (;;) {
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0 && errno == EINTR) continue;
    return LineSocket(fd);
  }
}

// Connects to host:port, trying again every 50 ms while it is refused or unreachable, until
// the deadline. what names the peer in the message of the failure.
inline LineSocket connect_until(const std::string& host, int port, LaunchClock::time_point deadline,
                                const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_error = "no attempt";
  for (;;) {
    addrinfo* found = nullptr;
    const int resolved = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    check(resolved == 0, "launch: cannot resolve the host '", host, "' of ", what, ": ", ::gai_strerror(resolved));
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
      LineSocket socket(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (!socket.is_open()) continue;
      if (::connect(socket.fd(), a->ai_addr, a->ai_addrlen) == 0) {
        ::freeaddrinfo(found);
        return socket;
      }
      last_error = std::strerror(errno);
    }
    ::freeaddrinfo(found);
    if (LaunchClock::now() >= deadline)
      fail("launch: could not reach ", what, " (last error: ", last_error, ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace ptrain::detail
