#pragma once
// One line per rank: each line is written with a single write so lines of ranks never interleave.
#include <cstdio>
#include <iostream>
#include <string>
#include <unistd.h>

namespace ptrain {

inline void log_line(const std::string& text, std::FILE* stream = stdout) {
  std::string line = text;
  if (line.empty() || line.back() != '\n') line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stream);
  std::fflush(stream);
}

inline bool is_terminal(std::FILE* stream = stdout) { return ::isatty(::fileno(stream)) != 0; }

}  // namespace ptrain
