#pragma once
// A PyTorch peer run in the same process tree as a bench: the Python that has torch
// (PTRAIN_TORCH_PYTHON, e.g. a venv with pip's torch, else /usr/bin/python3 with Debian's
// python3-torch) runs a peer script from bench/, whose JSON lines come back.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace bench {

inline std::string torch_python() {
  const char* python = std::getenv("PTRAIN_TORCH_PYTHON");
  return python && *python ? python : "/usr/bin/python3";
}

// The lines `torch_python() script args` prints (its stderr dropped); none when it cannot run.
inline std::vector<std::string> peer_lines(const std::string& script, const std::string& args) {
  std::vector<std::string> lines;
  const std::string cmd = torch_python() + " " PTRAIN_BENCH_DIR "/" + script + " " + args + " 2>/dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return lines;
  char line[1024];
  while (std::fgets(line, sizeof line, pipe)) lines.emplace_back(line);
  ::pclose(pipe);
  return lines;
}

// The value of "key" in one JSON line as the peers print them: a number, or a string unquoted.
inline std::string json_field(const std::string& line, const std::string& key) {
  const auto at = line.find("\"" + key + "\": ");
  if (at == std::string::npos) return {};
  std::string value = line.substr(at + key.size() + 4);
  if (!value.empty() && value[0] == '"') return value.substr(1, value.find('"', 1) - 1);
  return value.substr(0, value.find_first_of(",}"));
}

inline std::string unavailable_reason() { return torch_python() + " cannot import torch"; }

}  // namespace bench
