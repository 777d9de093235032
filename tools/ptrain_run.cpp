// ptrain_run --nproc N [--max-restarts K] [--min-nproc M] -- PROGRAM ARGS...: supervises a run, as
// torchrun --max-restarts does. It starts N ranks through the MPI launcher (mpiexec, or srun inside
// a Slurm allocation), each under a guard; when the run fails (a rank killed or exiting non-zero,
// the stall watchdog's abort) it ends every rank, says which rank failed and why, and starts
// PROGRAM ARGS --resume again from the newest checkpoint, up to K times (--help says the rules).
//
// How the failed rank is known: mpiexec's banner names only a guard's pid and exit code, so every
// rank runs under this program in its guard role (`ptrain_run --rank-guard -- PROGRAM ARGS`, which
// the launcher starts): ptrain_rank_guard's body (launch/rank_guard.hpp) names a rank a signal
// killed, and the guard role adds a line for a rank that exits non-zero. ptrain_run reads the
// launcher's stderr as it passes it on, and of the lines that say why (the guard's, the stall
// watchdog's "rank R: ... (PTRAIN_COLLECTIVE_TIMEOUT) ...: ranks that have not joined it: ...",
// abort_all's "rank R: message") takes the most telling: a signal first, then a stall, a message,
// an exit code.
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <ptrain/launch/process_info.hpp>
#include <ptrain/launch/rank_guard.hpp>

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* usage =
    "usage: ptrain_run --nproc N [--max-restarts K] [--min-nproc M] [--checkpoint-dir DIR]\n"
    "                  [--launcher auto|mpiexec|srun] -- PROGRAM ARGS...\n";

constexpr const char* help_text =
    "\n"
    "Starts PROGRAM ARGS on N ranks through the MPI launcher (mpiexec; srun --mpi=pmi2 inside a Slurm\n"
    "allocation, where SLURM_JOB_ID is set), each rank under a guard that names it when it dies. When\n"
    "a rank dies (a signal, a non-zero exit, an error that ends every rank) or the stall watchdog\n"
    "(PTRAIN_COLLECTIVE_TIMEOUT) ends the run, every rank is ended, the failed rank and the cause are\n"
    "said, and PROGRAM starts again with ARGS plus --resume (ARGS holding --resume already are kept as\n"
    "they are), which continues from the newest checkpoint, up to K times. The exit code is the run's:\n"
    "0 when an attempt finishes, else the last attempt's; 2 for bad arguments.\n"
    "\n"
    "  --nproc N            ranks to start, 1 to 65536\n"
    "  --max-restarts K     restarts after failures, 0 to 1000 (default 0: none)\n"
    "  --min-nproc M        the fewest ranks a restart may continue on, 1 to N (default N: the world\n"
    "                       never shrinks). As in torchrun's elastic mode a restart first keeps the\n"
    "                       size; when a restarted run fails again before saving a newer checkpoint\n"
    "                       than the one it resumed from (a lost host, a rank that cannot start), the\n"
    "                       next restart leaves out as many ranks as failed (at least one), not going\n"
    "                       below M, and says so. Checkpoints load at any world size; a smaller world\n"
    "                       trains the same global batch in larger shares, so it ends near, not bit\n"
    "                       for bit at, the full world's weights.\n"
    "  --checkpoint-dir DIR where PROGRAM saves its checkpoints (step-N/manifest.txt); default: the\n"
    "                       value of PROGRAM's own --checkpoint-dir. Restarts need it. A run that\n"
    "                       fails without leaving a newer checkpoint is restarted once; when the\n"
    "                       restarted run fails again with no newer checkpoint (as a program that\n"
    "                       fails before its first checkpoint does), it is not restarted again at that\n"
    "                       size: it would fail the same way.\n"
    "  --launcher L         auto (default: srun inside a Slurm allocation, else mpiexec), mpiexec or srun\n"
    "\n"
    "Example: ptrain_run --nproc 4 --max-restarts 3 -- ./fashion_mnist --checkpoint-dir ck --checkpoint-every 50\n";

struct Options {
  int nproc = 0;
  int max_restarts = 0;
  int min_nproc = 0;  // 0: nproc
  std::string checkpoint_dir;
  std::string launcher = "auto";
  std::vector<std::string> command;  // PROGRAM ARGS...
};

void say(const std::string& text) { ptrain::log_line("ptrain_run: " + text, stderr); }

// A refusal: one sentence naming the flag and what it takes, then the usage; exit code 2.
int refuse(const std::string& sentence) {
  say(sentence);
  std::fputs(usage, stderr);
  return 2;
}

// A whole number in [low, high], all of text.
std::optional<long> whole_number(const std::string& text, long low, long high) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (errno || !end || *end != '\0' || value < low || value > high) return std::nullopt;
  return value;
}

// The value PROGRAM ARGS give a flag (`--flag VALUE` or `--flag=VALUE`), empty when absent.
std::string flag_value(const std::vector<std::string>& args, const std::string& flag) {
  std::string value;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) value = args[i + 1];
    if (args[i].rfind(flag + "=", 0) == 0) value = args[i].substr(flag.size() + 1);
  }
  return value;
}

bool has_flag(const std::vector<std::string>& args, const std::string& flag) {
  return std::any_of(args.begin() + 1, args.end(), [&](const std::string& a) { return a == flag; });
}

// Parses argv into options; returns an exit code when the run must not start (--help: 0, bad
// arguments: 2, each refused in a sentence that names the flag and the values it takes).
std::optional<int> parse(int argc, char** argv, Options& o) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const std::string flags = "--nproc, --max-restarts, --min-nproc, --checkpoint-dir, --launcher or --help";
  std::optional<long> min_nproc;
  std::string min_nproc_text;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    std::string flag = args[i], value;
    if (flag == "--") {
      ++i;
      break;
    }
    if (flag == "-h" || flag == "--help") {
      std::fputs(usage, stdout);
      std::fputs(help_text, stdout);
      return 0;
    }
    if (flag.rfind("-", 0) != 0) break;  // PROGRAM, without the "--" before it
    bool inline_value = false;
    if (const auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      inline_value = true;
    }
    const bool known = flag == "--nproc" || flag == "--max-restarts" || flag == "--min-nproc" ||
                       flag == "--checkpoint-dir" || flag == "--launcher";
    if (!known) return refuse("unknown flag '" + flag + "': expected " + flags + ", then -- PROGRAM ARGS...");
    if (!inline_value) {
      if (i + 1 >= args.size()) return refuse(flag + " needs a value");
      value = args[++i];
    }
    if (flag == "--nproc") {
      const auto n = whole_number(value, 1, 65536);
      if (!n) return refuse("--nproc '" + value + "': expected a number of ranks from 1 to 65536");
      o.nproc = static_cast<int>(*n);
    } else if (flag == "--max-restarts") {
      const auto k = whole_number(value, 0, 1000);
      if (!k) return refuse("--max-restarts '" + value + "': expected a number of restarts from 0 to 1000");
      o.max_restarts = static_cast<int>(*k);
    } else if (flag == "--min-nproc") {
      min_nproc = whole_number(value, 1, 65536);
      min_nproc_text = value;
      if (!min_nproc) return refuse("--min-nproc '" + value + "': expected a number of ranks from 1 to --nproc");
    } else if (flag == "--checkpoint-dir") {
      if (value.empty()) return refuse("--checkpoint-dir '': expected the directory PROGRAM saves its checkpoints in");
      o.checkpoint_dir = value;
    } else {
      if (value != "auto" && value != "mpiexec" && value != "srun")
        return refuse("--launcher '" + value + "': expected auto, mpiexec or srun");
      o.launcher = value;
    }
  }
  o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())), args.end());
  if (o.nproc == 0) return refuse("--nproc N is required: the number of ranks to start, from 1 to 65536");
  if (min_nproc && *min_nproc > o.nproc)
    return refuse("--min-nproc " + min_nproc_text + " is above --nproc " + std::to_string(o.nproc) +
                  ": expected the fewest ranks a restart may continue on, from 1 to " + std::to_string(o.nproc));
  o.min_nproc = min_nproc ? static_cast<int>(*min_nproc) : o.nproc;
  if (o.command.empty() || o.command[0].empty())
    return refuse("no program to run: expected `ptrain_run --nproc N [...] -- PROGRAM ARGS...`");
  if (o.checkpoint_dir.empty()) o.checkpoint_dir = flag_value(o.command, "--checkpoint-dir");
  if (o.max_restarts > 0 && o.checkpoint_dir.empty())
    return refuse("--max-restarts " + std::to_string(o.max_restarts) +
                  " needs the directory PROGRAM saves its checkpoints in, to resume from: give PROGRAM "
                  "--checkpoint-dir DIR, or ptrain_run --checkpoint-dir DIR");
  if (o.launcher == "auto") o.launcher = std::getenv("SLURM_JOB_ID") ? "srun" : "mpiexec";
  return std::nullopt;
}

// The guard role: `ptrain_run --rank-guard [--] PROGRAM ARGS`, one per rank, started by the
// launcher. ptrain_rank_guard's body names a rank that a signal killed; a non-zero exit is named
// here, since mpiexec's banner would name only this process's pid.
int guard_rank(int argc, char** argv) {
  int first = 2;
  if (first < argc && std::strcmp(argv[first], "--") == 0) ++first;
  const int code = ptrain::run_rank_guard(std::span<char*>(argv + first, static_cast<std::size_t>(argc - first)));
  if (code != 0 && code < 128) {
    std::string who = "a rank";
    try {
      const ptrain::ProcessInfo info = ptrain::detect_process_info();
      who = "rank " + std::to_string(info.rank) + " of " + std::to_string(info.world_size);
    } catch (const std::exception&) {
    }
    char host[256] = "unknown host";
    ::gethostname(host, sizeof host - 1);
    ptrain::log_line("ptrain_run: " + who + " (on host " + std::string(host) + ") exited with code " +
                         std::to_string(code),
                     stderr);
  }
  return code;
}

// The newest checkpoint under dir: the largest N of a step-N holding manifest.txt (a checkpoint is
// published whole by renaming its staging directory, train/checkpoint.hpp), -1 when there is none.
long long newest_checkpoint(const std::string& dir) {
  long long newest = -1;
  std::error_code error;
  for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("step-", 0) != 0 || !std::filesystem::exists(it->path() / "manifest.txt")) continue;
    if (const auto step = whole_number(name.substr(5), 0, LONG_MAX)) newest = std::max(newest, static_cast<long long>(*step));
  }
  return newest;
}

std::string checkpoint_name(const std::string& dir, long long step) {
  return step < 0 ? "no checkpoint under " + dir : (std::filesystem::path(dir) / ("step-" + std::to_string(step))).string();
}

// Why a run failed, from the lines its ranks wrote to stderr.
struct Failure {
  int rank_of_cause = 4;   // 0 a signal, 1 a stall, 2 a rank's message, 3 an exit code
  std::string why;
  std::set<int> ranks;     // the ranks that failed
  int code = 0;            // the failed rank's exit code, or 128 + its signal, when a line says it
};

// Reads one line of the launcher's stderr; keeps the most telling cause seen (the first of its kind).
void read_cause(const std::string& line, std::optional<Failure>& failure) {
  static const std::regex killed(
      R"(^ptrain_rank_guard: rank (\d+) of \d+ \((pid \d+ on host [^)]*)\) was killed by signal (\d+)( \(SIG\w+)?)");
  static const std::regex exited(R"(^ptrain_run: rank (\d+) of \d+ \(on host ([^)]*)\) exited with code (\d+))");
  static const std::regex stall(R"(^rank (\d+): (.*\(PTRAIN_COLLECTIVE_TIMEOUT\).*)$)");
  static const std::regex message(R"(^rank (\d+): (.+)$)");
  static const std::regex guard_message(R"(^ptrain_rank_guard: (rank (\d+) of \d+ .*)$)");
  std::smatch m;
  Failure f;
  if (std::regex_search(line, m, killed)) {
    const std::string name = m[4].matched ? m[4].str() + ")" : "";
    f = {0, "rank " + m[1].str() + " (" + m[2].str() + ") was killed by signal " + m[3].str() + name, {std::stoi(m[1])},
         128 + std::stoi(m[3])};
  } else if (std::regex_search(line, m, stall)) {
    // "...: ranks that have not joined it: 1, 3 (world rank 2); rank 1: no answer ..."
    f = {1, "", {}};
    const std::string text = m[2];
    static const std::regex behind(R"(ranks that have not joined it: ([^;]*))");
    std::smatch b;
    std::string names;
    if (std::regex_search(text, b, behind)) {
      names = b[1];
      static const std::regex item(R"((\d+)( \(world rank (\d+)\))?)");
      for (std::sregex_iterator it(names.begin(), names.end(), item), end; it != end; ++it)
        f.ranks.insert(std::stoi((*it)[3].matched ? (*it)[3].str() : (*it)[1].str()));
    }
    const std::string collective = text.substr(0, text.find(" did not complete"));
    f.why = "the stall watchdog (PTRAIN_COLLECTIVE_TIMEOUT) ended the run: " +
            (names.empty() ? collective + " did not complete" : "rank(s) " + names + " had not joined " + collective) +
            ", said rank " + m[1].str();
    if (f.ranks.empty()) f.ranks.insert(std::stoi(m[1]));
  } else if (std::regex_search(line, m, exited)) {
    f = {3, "rank " + m[1].str() + " (on host " + m[2].str() + ") exited with code " + m[3].str(), {std::stoi(m[1])},
         std::stoi(m[3])};
  } else if (std::regex_search(line, m, guard_message) && line.find("which the launcher sent it") == std::string::npos) {
    f = {2, m[1], {std::stoi(m[2])}};
  } else if (std::regex_search(line, m, message)) {
    f = {2, "rank " + m[1].str() + " failed: " + m[2].str(), {std::stoi(m[1])}};
  } else {
    return;
  }
  if (!failure || f.rank_of_cause < failure->rank_of_cause) failure = f;
}

// Signals to ptrain_run go on to the launcher (which passes them to the ranks); an interrupt or a
// termination also means the run is not to be restarted.
volatile std::sig_atomic_t launcher_pid = 0;
volatile std::sig_atomic_t stop_signal = 0;

void forward_signal(int signal) {
  if (signal == SIGINT || signal == SIGTERM || signal == SIGHUP) stop_signal = signal;
  if (launcher_pid > 0) ::kill(static_cast<pid_t>(launcher_pid), signal);
}

// Every process below ptrain_run. It is the child subreaper (PR_SET_CHILD_SUBREAPER), so a rank
// whose launcher or guard has gone is reparented to it and still found here.
std::vector<pid_t> descendants() {
  std::map<pid_t, std::vector<pid_t>> children;
  std::error_code error;
  for (std::filesystem::directory_iterator it("/proc", error), end; !error && it != end; it.increment(error)) {
    const auto pid = whole_number(it->path().filename().string(), 1, LONG_MAX);
    if (!pid) continue;
    std::string text;
    try {
      std::ifstream stat(it->path() / "stat");
      text.assign(std::istreambuf_iterator<char>(stat), std::istreambuf_iterator<char>());
    } catch (const std::ios_base::failure&) {
      continue;  // the process ended between the open and the read (ESRCH): libstdc++'s filebuf throws
    }
    const auto close = text.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    std::string state;
    long parent = 0;
    if (rest >> state >> parent) children[static_cast<pid_t>(parent)].push_back(static_cast<pid_t>(*pid));
  }
  std::vector<pid_t> found, queue{::getpid()};
  while (!queue.empty()) {
    const pid_t p = queue.back();
    queue.pop_back();
    for (pid_t c : children[p]) {
      found.push_back(c);
      queue.push_back(c);
    }
  }
  return found;
}

// Ends every process left below ptrain_run (a stopped rank, a rank whose launcher died) and reaps
// them; the launcher's status, when it is among them, goes to launcher_status.
void end_all_below(pid_t launcher, std::optional<int>& launcher_status) {
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (true) {
    const auto left = descendants();
    for (pid_t p : left) ::kill(p, SIGKILL);
    int status = 0;
    for (pid_t p; (p = ::waitpid(-1, &status, WNOHANG)) > 0;)
      if (p == launcher) launcher_status = status;
    if (left.empty() || Clock::now() > until) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct Outcome {
  int code = 0;  // the launcher's exit code, or 128 + the signal that ended it
  std::optional<Failure> failure;
  double seconds = 0;
};

// Runs one attempt: the launcher with command, its stderr passed on and read for the cause. Once a
// cause is seen, the launcher has grace_seconds to end the ranks, then ptrain_run ends them.
Outcome run_attempt(const std::vector<std::string>& command, double grace_seconds) {
  Outcome out;
  const auto start = Clock::now();
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    say("cannot make a pipe: " + std::string(std::strerror(errno)));
    out.code = 127;
    return out;
  }
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    say("fork failed: " + std::string(std::strerror(errno)));
    out.code = 127;
    return out;
  }
  if (child == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "ptrain_run: cannot run the launcher '%s': %s\n", argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  launcher_pid = child;
  ::close(pipe_fds[1]);
  const int fd = pipe_fds[0];
  std::string pending;
  std::optional<Clock::time_point> deadline;
  bool terminated = false, open = true;
  std::optional<int> status;  // the launcher's, once it has ended
  std::optional<Clock::time_point> drain_until;
  while (true) {
    pollfd p{open ? fd : -1, POLLIN, 0};  // a negative fd: poll only waits
    const int ready = ::poll(&p, 1, 100);
    if (ready > 0) {
      char buffer[4096];
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n > 0) {
        (void)!::write(STDERR_FILENO, buffer, static_cast<std::size_t>(n));
        pending.append(buffer, static_cast<std::size_t>(n));
        for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
          try {
            read_cause(pending.substr(0, nl), out.failure);
          } catch (const std::exception&) {  // a rank number past int: not a line of ours
          }
          if (out.failure && !deadline)
            deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_seconds));
        }
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        open = false;
      }
    }
    if (int st = 0; !status && ::waitpid(child, &st, WNOHANG) == child) status = st;
    if (status && !drain_until) {
      launcher_pid = 0;
      drain_until = Clock::now() + std::chrono::seconds(1);  // output still in flight from the ranks
    }
    const auto now = Clock::now();
    if (status && (!open || now > *drain_until)) break;
    if (!status && deadline && now > *deadline && !terminated) {
      say("the launcher has not ended the ranks " + std::to_string(static_cast<int>(grace_seconds)) +
          " s after the failure: ending them");
      end_all_below(child, status);
      terminated = true;
    }
  }
  try {
    if (!pending.empty()) read_cause(pending, out.failure);
  } catch (const std::exception&) {
  }
  ::close(fd);
  end_all_below(child, status);  // whatever the launcher left: no rank outlives its attempt
  launcher_pid = 0;
  out.code = !status ? 127 : WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
  // Ended by ptrain_run, the launcher says nothing of the run: the failed rank's code is the run's.
  if (terminated && out.failure && out.failure->code != 0) out.code = out.failure->code;
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", s);
  return text;
}

std::string joined(const std::vector<std::string>& words) {
  std::string line;
  for (const auto& w : words) line += (line.empty() ? "" : " ") + w;
  return line;
}

int supervise(const Options& o) {
  std::string self(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (n <= 0) return refuse("cannot find its own program (/proc/self/exe), which each rank runs under");
  self.resize(static_cast<std::size_t>(n));
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  struct sigaction action {};
  action.sa_handler = forward_signal;
  sigemptyset(&action.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) ::sigaction(s, &action, nullptr);

  const bool resumes_already = has_flag(o.command, "--resume");
  const auto start = Clock::now();
  int nproc = o.nproc, restarts = 0;
  long long resumed_from = o.checkpoint_dir.empty() ? -1 : newest_checkpoint(o.checkpoint_dir);
  for (int attempt = 1;; ++attempt) {
    std::vector<std::string> command;
    if (o.launcher == "srun")
      command = {"srun", "--mpi=pmi2", "--ntasks=" + std::to_string(nproc), "--kill-on-bad-exit=1"};
    else
      command = {"mpiexec", "-n", std::to_string(nproc)};
    command.insert(command.end(), {self, "--rank-guard", "--"});
    command.insert(command.end(), o.command.begin(), o.command.end());
    if (restarts > 0 && !resumes_already) command.push_back("--resume");  // once, whatever the restart
    say("attempt " + std::to_string(attempt) + " on " + std::to_string(nproc) + " rank(s) through " + o.launcher + ": " +
        joined(o.command) + (restarts > 0 && !resumes_already ? " --resume" : ""));
    const Outcome outcome = run_attempt(command, 5);
    const double total = std::chrono::duration<double>(Clock::now() - start).count();
    if (outcome.code == 0 && stop_signal) {
      say("the run ended (exit code 0) on signal " + std::to_string(stop_signal) + ", which ptrain_run passed on, after " +
          std::to_string(restarts) + " restart(s), in " + seconds_text(total) +
          " (a run that saved a checkpoint when signalled goes on with --resume)");
      return 0;
    }
    if (outcome.code == 0) {
      say("the run finished (exit code 0) after " + std::to_string(restarts) + " restart(s), in " + seconds_text(total));
      return 0;
    }
    const std::string cause = outcome.failure ? outcome.failure->why : "no rank said why";
    say("attempt " + std::to_string(attempt) + " on " + std::to_string(nproc) + " rank(s) failed after " +
        seconds_text(outcome.seconds) + " (exit code " + std::to_string(outcome.code) + "): " + cause);
    const auto give_up = [&](const std::string& reason) {
      say(reason + "; the run failed (exit code " + std::to_string(outcome.code) + ") after " + std::to_string(restarts) +
          " restart(s), in " + seconds_text(total));
      return outcome.code;
    };
    if (stop_signal) return give_up("stopped by signal " + std::to_string(stop_signal) + ": not restarting");
    if (restarts >= o.max_restarts)
      return give_up("no restarts left (--max-restarts " + std::to_string(o.max_restarts) + ")");
    const long long newest = newest_checkpoint(o.checkpoint_dir);
    if (newest <= resumed_from && restarts > 0) {
      // A restarted run failed before saving anything newer: again at this size, it would fail the same way.
      const std::string where = resumed_from < 0 ? "before its first checkpoint"
                                                 : "before saving a checkpoint newer than " +
                                                       checkpoint_name(o.checkpoint_dir, resumed_from);
      if (nproc <= o.min_nproc)
        return give_up("the restarted run failed again " + where + ": not restarting it" +
                       (o.min_nproc < o.nproc ? " (already at --min-nproc " + std::to_string(o.min_nproc) + ")" : ""));
      const int failed = outcome.failure ? static_cast<int>(outcome.failure->ranks.size()) : 1;
      const int smaller = std::max(o.min_nproc, nproc - std::max(1, failed));
      say("the restarted run failed again " + where + " on " + std::to_string(nproc) + " rank(s): continuing on " +
          std::to_string(smaller) + " (--min-nproc " + std::to_string(o.min_nproc) + ")");
      nproc = smaller;
    }
    ++restarts;
    resumed_from = newest;
    say("restart " + std::to_string(restarts) + " of " + std::to_string(o.max_restarts) + " on " +
        std::to_string(nproc) + " rank(s), resuming from " + checkpoint_name(o.checkpoint_dir, newest));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--rank-guard") == 0) return guard_rank(argc, argv);
  Options options;
  if (const auto code = parse(argc, argv, options)) return *code;
  return supervise(options);
}
