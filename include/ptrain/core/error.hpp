#pragma once
// Errors: one exception type whose message says what was wrong, where, and what was expected.
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ptrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}
}  // namespace detail

// check(cond, "parts", of, "message") throws ptrain::Error with the parts joined.
template <class... Parts>
inline void check(bool condition, Parts&&... parts) {
  if (!condition) throw Error(detail::concat(std::forward<Parts>(parts)...));
}

template <class... Parts>
[[noreturn]] inline void fail(Parts&&... parts) {
  throw Error(detail::concat(std::forward<Parts>(parts)...));
}

}  // namespace ptrain
