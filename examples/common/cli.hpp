#pragma once
// The examples' command lines: `--name value` (or `-rd value` where a project used single
// dashes), typed defaults, --help printed from the declarations, unknown flags rejected.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace examples {

class Cli {
 public:
  Cli(std::string program, std::string summary) : program_(std::move(program)), summary_(std::move(summary)) {}

  Cli& option(const std::string& flag, const std::string& default_value, const std::string& help) {
    options_.push_back({flag, help, default_value});
    values_[flag] = default_value;
    return *this;
  }
  // short_flag is another name of flag (a project's own spelling, e.g. -iu for --init-url).
  Cli& alias(const std::string& short_flag, const std::string& flag) {
    aliases_[short_flag] = flag;
    return *this;
  }
  const std::string& program() const { return program_; }

  // Returns false (after printing) when the program should exit: --help (code 0) or a bad flag (code 2).
  bool parse(int argc, char** argv, int& exit_code) {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = aliases_.count(argv[i]) ? aliases_.at(argv[i]) : argv[i];
      if (arg == "--help" || arg == "-h") {
        print_help(stdout);
        exit_code = 0;
        return false;
      }
      if (!values_.count(arg)) {
        std::fprintf(stderr, "%s: unknown option '%s'\n", program_.c_str(), arg.c_str());
        print_help(stderr);
        exit_code = 2;
        return false;
      }
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: option '%s' needs a value\n", program_.c_str(), arg.c_str());
        exit_code = 2;
        return false;
      }
      values_[arg] = argv[++i];
    }
    return true;
  }

  std::string str(const std::string& flag) const { return values_.at(flag); }
  long integer(const std::string& flag) const { return std::stol(number(flag)); }
  double real(const std::string& flag) const { return std::stod(number(flag)); }

 private:
  struct Option {
    std::string flag, help, default_value;
  };

  std::string number(const std::string& flag) const {
    const std::string& v = values_.at(flag);
    char* end = nullptr;
    std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0') {
      std::fprintf(stderr, "%s: option '%s' expects a number, got '%s'\n", program_.c_str(), flag.c_str(), v.c_str());
      std::exit(2);
    }
    return v;
  }

  void print_help(std::FILE* out) const {
    std::fprintf(out, "usage: %s [options]\n%s\n\noptions:\n", program_.c_str(), summary_.c_str());
    for (const auto& o : options_)
      std::fprintf(out, "  %-16s %s (default: %s)\n", o.flag.c_str(), o.help.c_str(),
                   o.default_value.empty() ? "none" : o.default_value.c_str());
    for (const auto& [short_flag, flag] : aliases_)
      std::fprintf(out, "  %-16s same as %s\n", short_flag.c_str(), flag.c_str());
    std::fprintf(out, "  %-16s %s\n", "--help", "print this help");
  }

  std::string program_, summary_;
  std::vector<Option> options_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> aliases_;
};

}  // namespace examples
