#pragma once
// A small, strict JSON reader (RFC 8259) for file headers such as safetensors': the whole value
// is parsed into a tree; errors give the byte offset. Numbers are kept as their text.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"

namespace ptrain::io::detail {

struct JsonMember;

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text;  // a string's contents (UTF-8), a number's literal
  std::vector<JsonValue> items;
  // In the order written. A struct, not std::pair<std::string, JsonValue>: a pair of an
  // incomplete type may not be instantiated (clang and libstdc++ refuse it).
  std::vector<JsonMember> members;

  static const char* kind_name(Kind k) {
    constexpr const char* names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    return names[static_cast<int>(k)];
  }
  const char* kind_name() const { return kind_name(kind); }
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

class JsonParser {
 public:
  // where: what the text is, for messages ("model.safetensors: header").
  JsonParser(std::string_view text, std::string where) : text_(text), where_(std::move(where)) {}

  // The one value the text holds; only whitespace may follow it.
  JsonValue parse() {
    JsonValue v = value(0);
    skip_space();
    if (pos_ != text_.size()) error("unexpected '", text_[pos_], "' after the value");
    return v;
  }

 private:
  static constexpr int max_depth = 64;  // a hostile file must not overflow the stack

  template <class... Parts>
  [[noreturn]] void error(Parts&&... parts) const {
    fail(where_, ": invalid JSON at byte ", pos_, ": ", std::forward<Parts>(parts)...);
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  char peek() {
    if (pos_ >= text_.size()) error("the text ends early");
    return text_[pos_];
  }
  void expect(char c) {
    if (peek() != c) error("expected '", c, "', found '", text_[pos_], "'");
    ++pos_;
  }
  void literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) error("expected '", word, "'");
    pos_ += word.size();
  }

  JsonValue value(int depth) {
    if (depth > max_depth) error("nested deeper than ", max_depth, " levels");
    skip_space();
    JsonValue v;
    const char c = peek();
    if (c == '{') {
      v.kind = JsonValue::Kind::Object;
      ++pos_;
      skip_space();
      if (peek() == '}') return ++pos_, v;
      std::unordered_set<std::string> keys;
      for (;;) {
        skip_space();
        std::string key = string();
        if (!keys.insert(key).second) error("key \"", key, "\" appears twice");
        skip_space();
        expect(':');
        v.members.push_back({std::move(key), value(depth + 1)});
        skip_space();
        if (peek() == '}') return ++pos_, v;
        expect(',');
      }
    }
    if (c == '[') {
      v.kind = JsonValue::Kind::Array;
      ++pos_;
      skip_space();
      if (peek() == ']') return ++pos_, v;
      for (;;) {
        v.items.push_back(value(depth + 1));
        skip_space();
        if (peek() == ']') return ++pos_, v;
        expect(',');
      }
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::String;
      v.text = string();
    } else if (c == 't' || c == 'f') {
      v.kind = JsonValue::Kind::Bool;
      v.boolean = c == 't';
      literal(v.boolean ? "true" : "false");
    } else if (c == 'n') {
      literal("null");
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = JsonValue::Kind::Number;
      v.text = number();
    } else {
      error("unexpected '", c, "'");
    }
    return v;
  }

  std::string number() {
    const std::size_t start = pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      if (pos_ == from) error("a number needs a digit here");
    };
    if (text_[pos_] == '-') ++pos_;
    if (peek() == '0')
      ++pos_;
    else
      digits();
    if (pos_ < text_.size() && text_[pos_] == '.') ++pos_, digits();
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      digits();
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      const char c = peek();
      ++pos_;
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) --pos_, error("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      const char e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': append_utf8(out, code_point()); break;
        default: --pos_, error("unknown escape '\\", e, "'");
      }
    }
  }

  std::uint32_t hex4() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = peek();
      ++pos_;
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<std::uint32_t>(h - 'A' + 10);
      else
        --pos_, error("expected a hex digit in \\u escape");
    }
    return v;
  }
  // After "\u": one code point, joining a UTF-16 surrogate pair.
  std::uint32_t code_point() {
    const std::uint32_t high = hex4();
    if (high >= 0xDC00 && high <= 0xDFFF) error("unpaired low surrogate in \\u escape");
    if (high < 0xD800 || high > 0xDBFF) return high;
    literal("\\u");
    const std::uint32_t low = hex4();
    if (low < 0xDC00 || low > 0xDFFF) error("a high surrogate must be followed by a low one");
    return 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
  }
  static void append_utf8(std::string& out, std::uint32_t cp) {
    auto byte = [&](std::uint32_t b) { out += static_cast<char>(b); };
    if (cp < 0x80) {
      byte(cp);
    } else if (cp < 0x800) {
      byte(0xC0 | (cp >> 6)), byte(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      byte(0xE0 | (cp >> 12)), byte(0x80 | ((cp >> 6) & 0x3F)), byte(0x80 | (cp & 0x3F));
    } else {
      byte(0xF0 | (cp >> 18)), byte(0x80 | ((cp >> 12) & 0x3F)), byte(0x80 | ((cp >> 6) & 0x3F)),
          byte(0x80 | (cp & 0x3F));
    }
  }

  std::string_view text_;
  std::string where_;
  std::size_t pos_ = 0;
};

inline JsonValue parse_json(std::string_view text, std::string where) { return JsonParser(text, std::move(where)).parse(); }

// A JSON string with the escapes serde_json writes (safetensors' own writer), so that a header
// written here is byte for byte the one Python's safetensors writes.
inline std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          constexpr char hex[] = "0123456789abcdef";
          out += "\\u00";
          out += hex[(c >> 4) & 0xF];
          out += hex[c & 0xF];
        } else {
          out += c;
        }
    }
  }
  return out + '"';
}

}  // namespace ptrain::io::detail
