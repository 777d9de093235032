#pragma once
// Errors: one exception type whose message says what was wrong, where, and what was expected.
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace ptrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

// An integer a message writes in hexadecimal (as `std::hex` would, without the 0x).
struct Hex {
  std::uint64_t value;
};

// One part of a message: text, a character, an integer or a floating-point number, written as an
// std::ostream writes it. A part of another type is written by its operator<< into a string first
// (message_part below). Every check builds its message from these through one function,
// join_message, so a check compiles to a few stores and a call, not to an ostringstream of its own.
class MessagePart {
 public:
  MessagePart(std::string_view text) : kind_(Kind::text), text_(text) {}
  MessagePart(const char* text) : kind_(Kind::text), text_(text ? std::string_view(text) : std::string_view()) {}
  MessagePart(char c) : kind_(Kind::character), character_(c) {}
  MessagePart(signed char c) : kind_(Kind::character), character_(static_cast<char>(c)) {}
  MessagePart(unsigned char c) : kind_(Kind::character), character_(static_cast<char>(c)) {}
  MessagePart(bool b) : kind_(Kind::signed_integer), signed_(b) {}
  template <class I>
    requires std::is_integral_v<I> && std::is_signed_v<I>
  MessagePart(I i) : kind_(Kind::signed_integer), signed_(i) {}
  template <class I>
    requires std::is_integral_v<I> && std::is_unsigned_v<I>
  MessagePart(I i) : kind_(Kind::unsigned_integer), unsigned_(i) {}
  MessagePart(double d) : kind_(Kind::floating), floating_(d) {}
  MessagePart(Hex h) : kind_(Kind::hex), unsigned_(h.value) {}

  void write_to(std::ostream& out) const {
    switch (kind_) {
      case Kind::text: out << text_; break;
      case Kind::character: out << character_; break;
      case Kind::signed_integer: out << signed_; break;
      case Kind::unsigned_integer: out << unsigned_; break;
      case Kind::floating: out << floating_; break;
      case Kind::hex: out << std::hex << unsigned_ << std::dec; break;
    }
  }

 private:
  enum class Kind : unsigned char { text, character, signed_integer, unsigned_integer, floating, hex };
  Kind kind_;
  union {
    std::string_view text_;
    char character_;
    long long signed_;
    unsigned long long unsigned_;
    double floating_;
  };
};

// Whether a part goes into a MessagePart as it is (else message_part formats it).
template <class Part>
inline constexpr bool is_plain_message_part =
    std::is_convertible_v<const Part&, std::string_view> || std::is_convertible_v<const Part&, const char*> ||
    (std::is_arithmetic_v<Part> && !std::is_same_v<Part, long double>) || std::is_same_v<Part, Hex>;

// part itself where a MessagePart takes it; otherwise the text its operator<< writes (a temporary
// that lives to the end of the check's full expression, as the MessagePart viewing it does).
template <class Part>
decltype(auto) message_part(const Part& part) {
  if constexpr (is_plain_message_part<Part>) {
    return (part);
  } else {
    static_assert(!std::is_function_v<std::remove_pointer_t<Part>>,
                  "a stream manipulator is not a message part: write the value as one (detail::Hex)");
    std::ostringstream out;
    out << part;
    return std::move(out).str();
  }
}

inline std::string join_message(std::initializer_list<MessagePart> parts) {
  std::ostringstream out;
  for (const MessagePart& part : parts) part.write_to(out);
  return std::move(out).str();
}

[[noreturn]] [[gnu::cold]] [[gnu::noinline]] inline void throw_error(std::initializer_list<MessagePart> parts) {
  throw Error(join_message(parts));
}

template <class... Parts>
std::string concat(const Parts&... parts) {
  return join_message({MessagePart(message_part(parts))...});
}

}  // namespace detail

// check(cond, "parts", of, "message") throws ptrain::Error with the parts joined.
template <class... Parts>
inline void check(bool condition, const Parts&... parts) {
  if (!condition) [[unlikely]]
    detail::throw_error({detail::MessagePart(detail::message_part(parts))...});
}

template <class... Parts>
[[noreturn]] inline void fail(const Parts&... parts) {
  detail::throw_error({detail::MessagePart(detail::message_part(parts))...});
}

}  // namespace ptrain
