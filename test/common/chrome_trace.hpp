#pragma once
// A Chrome trace JSON file read back for the tests: its complete ("X") events and the names the
// metadata events give each (pid, tid) track.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ptrain/core/error.hpp>
#include <ptrain/io/detail/json.hpp>

#include "files.hpp"

namespace ptrain::test {

struct TraceSpan {
  std::string name;
  int pid = 0, tid = 0;
  double ts = 0, dur = 0;
  double end() const { return ts + dur; }
};

struct ChromeTrace {
  std::vector<TraceSpan> spans;
  std::map<std::pair<int, int>, std::string> track_names;  // (pid, tid) -> thread_name

  std::vector<TraceSpan> named(const std::string& prefix, int pid) const {
    std::vector<TraceSpan> found;
    for (const auto& s : spans)
      if (s.pid == pid && s.name.starts_with(prefix)) found.push_back(s);
    return found;
  }
};

inline ChromeTrace read_chrome_trace(const std::filesystem::path& path) {
  const Bytes bytes = read_bytes(path);
  const io::detail::JsonValue root =
      io::detail::parse_json(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path.string());
  const auto member = [&](const io::detail::JsonValue& object, const std::string& key) -> const io::detail::JsonValue& {
    for (const auto& [name, value] : object.members)
      if (name == key) return value;
    fail(path.string(), ": an object without \"", key, "\"");
  };
  ChromeTrace trace;
  for (const auto& event : member(root, "traceEvents").items) {
    const std::string phase = member(event, "ph").text;
    const int pid = std::stoi(member(event, "pid").text);
    if (phase == "X") {
      trace.spans.push_back({member(event, "name").text, pid, std::stoi(member(event, "tid").text),
                             std::stod(member(event, "ts").text), std::stod(member(event, "dur").text)});
    } else if (phase == "M" && member(event, "name").text == "thread_name") {
      trace.track_names[{pid, std::stoi(member(event, "tid").text)}] = member(member(event, "args"), "name").text;
    }
  }
  return trace;
}

}  // namespace ptrain::test
