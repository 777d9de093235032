#pragma once
// The PyTorch peers run in the same process tree as a bench: each Python that has torch runs a
// peer script from bench/, whose JSON lines come back. The peers are PTRAIN_TORCH_PYTHONS (paths
// separated by ':', as bench/run_train_step.sh sets them: the venv with pip's torch, then
// /usr/bin/python3 with Debian's python3-torch), else PTRAIN_TORCH_PYTHON, else /usr/bin/python3.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace bench {

// bench/, where the peer scripts are (bench/source_dir.cpp, the one object that holds its path).
const char* source_dir();

struct TorchPeer {
  std::string python;
  std::string name;  // "debian" for the system Python, "pip" for any other (a venv)
};

inline std::vector<TorchPeer> torch_peers() {
  std::string list;
  if (const char* many = std::getenv("PTRAIN_TORCH_PYTHONS"); many && *many) list = many;
  else if (const char* one = std::getenv("PTRAIN_TORCH_PYTHON"); one && *one) list = one;
  else list = "/usr/bin/python3";
  std::vector<TorchPeer> peers;
  for (std::size_t begin = 0; begin <= list.size();) {
    std::size_t end = list.find(':', begin);
    if (end == std::string::npos) end = list.size();
    if (end > begin) {
      std::string python = list.substr(begin, end - begin);
      std::string name = python == "/usr/bin/python3" ? "debian" : "pip";
      peers.push_back({std::move(python), std::move(name)});
    }
    begin = end + 1;
  }
  return peers;
}

// The lines `peer.python script args` prints (its stderr dropped); none when it cannot run.
inline std::vector<std::string> peer_lines(const TorchPeer& peer, const std::string& script, const std::string& args) {
  std::vector<std::string> lines;
  const std::string cmd = peer.python + " " + source_dir() + "/" + script + " " + args + " 2>/dev/null";
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

inline void print_unavailable(const char* bench_name, const TorchPeer& peer) {
  std::printf("bench=%s peer=pytorch_%s status=unavailable reason=\"%s cannot import torch\"\n", bench_name,
              peer.name.c_str(), peer.python.c_str());
}

}  // namespace bench
