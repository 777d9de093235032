#pragma once
// The examples' command lines: `--name value` (or `-rd value` where a project used single
// dashes), --help printed from the declarations, unknown flags rejected. Every flag is declared
// with what it accepts (free text, an integer in a range, a real in a range, one of a list of
// names, an output file) and every value, given or default, is checked when the line is parsed,
// whether the run goes on to use it or not: `--batch 1.5`, `--epochs 4294967296` or an unknown
// `--schedule` end the program before anything starts, with a sentence naming the flag.
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace examples {

class Cli {
 public:
  // A command line that cannot run; the message names the flag and what it expects.
  class Error : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
  };
  enum class Parsed { run, help };

  Cli(std::string program, std::string summary) : program_(std::move(program)), summary_(std::move(summary)) {}

  // Free text: paths, names, an extension.
  Cli& option(const std::string& flag, const std::string& default_value, const std::string& help) {
    return declare({flag, help, default_value, Kind::text, {}, 0, 0, 0, 0});
  }
  // An integer in [min, max]; counts (epochs, batch sizes) are positive: min 1. No fraction, no
  // wrap-around: `1.5` and `4294967296` (for an int) are refused.
  Cli& integer_option(const std::string& flag, long default_value, const std::string& help, long min = 1,
                      long max = INT_MAX) {
    return declare({flag, help, std::to_string(default_value), Kind::integer, {}, min, max, 0, 0});
  }
  // A finite real in [min, max], parsed to its last character.
  Cli& real_option(const std::string& flag, const std::string& default_value, const std::string& help,
                   double min = 0, double max = std::numeric_limits<double>::infinity()) {
    return declare({flag, help, default_value, Kind::real, {}, 0, 0, min, max});
  }
  // One of `values`.
  Cli& choice_option(const std::string& flag, const std::string& default_value, std::vector<std::string> values,
                     const std::string& help) {
    return declare({flag, help, default_value, Kind::choice, std::move(values), 0, 0, 0, 0});
  }
  // A file the run writes. Where the flag is left at a default naming a file that exists (the
  // last run's log), a fresh name is taken, NAME_2.EXT, NAME_3.EXT, ... (PyTorch Lightning's
  // version_N directories keep earlier runs the same way); a name given on the command line is
  // the user's choice and is overwritten. With --resume the run continues the last run's file:
  // the newest of NAME.EXT, NAME_2.EXT, ... that exists. Empty: no file.
  Cli& output_option(const std::string& flag, const std::string& default_value, const std::string& help) {
    return declare({flag, help, default_value, Kind::output, {}, 0, 0, 0, 0});
  }

  // A flag without a value: given, it is on (flag(name) is true); --resume.
  Cli& switch_option(const std::string& flag, const std::string& help) {
    return declare({flag, help, "", Kind::on_off, {}, 0, 0, 0, 0});
  }

  // short_flag is another name of flag (a project's own spelling, e.g. -iu for --init-url).
  Cli& alias(const std::string& short_flag, const std::string& flag) {
    aliases_[short_flag] = flag;
    return *this;
  }
  const std::string& program() const { return program_; }

  // Reads the flags after the program name. Throws Cli::Error for an unknown flag, a missing value
  // or a value the flag does not accept (defaults included).
  Parsed read(const std::vector<std::string>& args) {
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& arg = aliases_.count(args[i]) ? aliases_.at(args[i]) : args[i];
      if (arg == "--help" || arg == "-h") return Parsed::help;
      if (!values_.count(arg)) throw Error("unknown option '" + arg + "' (--help lists them)");
      if (is_switch(arg)) {
        given_[arg] = true;
        continue;
      }
      if (i + 1 >= args.size()) throw Error("option '" + arg + "' needs a value");
      values_[arg] = args[++i];
      given_[arg] = true;
    }
    for (const Option& o : options_) check(o);
    return Parsed::run;
  }

  // Returns false (after printing) when the program should exit: --help (code 0) or a bad flag (code 2).
  bool parse(int argc, char** argv, int& exit_code) {
    try {
      if (read(std::vector<std::string>(argv + 1, argv + argc)) == Parsed::run) return true;
      print_help(stdout);
      exit_code = 0;
    } catch (const Error& e) {
      std::fprintf(stderr, "%s: %s\n", program_.c_str(), e.what());
      exit_code = 2;
    }
    return false;
  }

  std::string str(const std::string& flag) const { return values_.at(flag); }
  long integer(const std::string& flag) const { return integers_.at(flag); }
  double real(const std::string& flag) const { return reals_.at(flag); }
  bool flag(const std::string& name) const { return given_.count(name) && given_.at(name); }

 private:
  enum class Kind { text, integer, real, choice, output, on_off };
  struct Option {
    std::string flag, help, default_value;
    Kind kind = Kind::text;
    std::vector<std::string> values;  // of a choice
    long least = 0, most = 0;         // of an integer
    double min = 0, max = 0;          // of a real
  };

  Cli& declare(Option option) {
    values_[option.flag] = option.default_value;
    options_.push_back(std::move(option));
    return *this;
  }

  bool is_switch(const std::string& flag) const {
    for (const Option& o : options_)
      if (o.flag == flag) return o.kind == Kind::on_off;
    return false;
  }

  void check(const Option& o) {
    const std::string& value = values_.at(o.flag);
    const auto refuse = [&](const std::string& expected) {
      throw Error(o.flag + " '" + value + "': expected " + expected);
    };
    switch (o.kind) {
      case Kind::text:
      case Kind::on_off:
        break;
      case Kind::integer: {
        long number = 0;
        const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
        if (value.empty() || error != std::errc() || end != value.data() + value.size() || number < o.least ||
            number > o.most)
          refuse("an integer " + range(o));
        integers_[o.flag] = number;
        break;
      }
      case Kind::real: {
        char* end = nullptr;
        errno = 0;
        const double number = value.empty() || std::isspace(static_cast<unsigned char>(value[0]))
                                  ? std::nan("")
                                  : std::strtod(value.c_str(), &end);
        if (std::isnan(number) || end != value.c_str() + value.size() || errno == ERANGE || !std::isfinite(number) ||
            number < o.min || number > o.max)
          refuse("a number " + range(o));
        reals_[o.flag] = number;
        break;
      }
      case Kind::choice: {
        bool known = false;
        for (const auto& v : o.values) known = known || v == value;
        if (!known) refuse("one of " + join(o.values));
        break;
      }
      case Kind::output:
        if (!given_[o.flag] && !value.empty() && std::filesystem::exists(value))
          values_[o.flag] = flag("--resume") ? newest_name(value) : unused_name(value);
        break;
    }
  }

  // NAME_<version>.EXT
  static std::filesystem::path version_of(const std::filesystem::path& taken, int version) {
    std::filesystem::path named = taken;
    named.replace_filename(taken.stem().string() + "_" + std::to_string(version) + taken.extension().string());
    return named;
  }
  static std::string unused_name(const std::filesystem::path& taken) {
    for (int version = 2;; ++version)
      if (!std::filesystem::exists(version_of(taken, version))) return version_of(taken, version).string();
  }
  // The last name unused_name skips: the newest run's file.
  static std::string newest_name(const std::filesystem::path& taken) {
    std::filesystem::path newest = taken;
    for (int version = 2; std::filesystem::exists(version_of(taken, version)); ++version) newest = version_of(taken, version);
    return newest.string();
  }

  static std::string range(const Option& o) {
    std::ostringstream text;
    text << std::setprecision(10);
    if (o.kind == Kind::integer)
      text << "from " << o.least << " to " << o.most;
    else if (std::isinf(o.max))
      text << "of at least " << o.min;
    else
      text << "from " << o.min << " to " << o.max;
    return text.str();
  }
  static std::string join(const std::vector<std::string>& values) {
    std::string text;
    for (std::size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + values[i];
    return text;
  }

  void print_help(std::FILE* out) const {
    std::fprintf(out, "usage: %s [options]\n%s\n\noptions:\n", program_.c_str(), summary_.c_str());
    for (const auto& o : options_) {
      std::string accepts;
      if (o.kind == Kind::choice) accepts = "; one of " + join(o.values);
      if (o.kind == Kind::integer || o.kind == Kind::real)
        accepts = std::string("; ") + (o.kind == Kind::integer ? "an integer " : "a number ") + range(o);
      if (o.kind == Kind::on_off) {
        std::fprintf(out, "  %-16s %s\n", o.flag.c_str(), o.help.c_str());
        continue;
      }
      std::fprintf(out, "  %-16s %s (default: %s%s)\n", o.flag.c_str(), o.help.c_str(),
                   o.default_value.empty() ? "none" : o.default_value.c_str(), accepts.c_str());
    }
    for (const auto& [short_flag, flag] : aliases_)
      std::fprintf(out, "  %-16s same as %s\n", short_flag.c_str(), flag.c_str());
    std::fprintf(out, "  %-16s %s\n", "--help", "print this help");
  }

  std::string program_, summary_;
  std::vector<Option> options_;
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> given_;
  std::map<std::string, long> integers_;
  std::map<std::string, double> reals_;
  std::map<std::string, std::string> aliases_;
};

}  // namespace examples
