"""What both sweeps (sweep.py, hyper_sweep.py) share: the grid flags, finding the example's binary,
running it under mpiexec and reading what it printed and logged, and writing files atomically.

A run passes --csv RUN_DIR/epochs.csv to the example and reads back
  - the per-epoch CSV log (epoch, train_loss, train_<metric>..., val_loss, val_<metric>...,
    images_per_second, seconds, lr), written by the Trainer on rank 0;
  - the closing lines run_example prints on rank 0 (examples/common/run.hpp):
      final <metric name> <value>[%]
      peak memory <MiB> MiB (the largest resident set of <N> rank(s))
      total run time <seconds> s
"""
import argparse
import csv
import io
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class SweepError(Exception):
    """A mistake in the sweep's own arguments or files: printed as one line, exit code 2."""


def main_guard(main):
    """Runs main(); a SweepError ends the program with its message and exit code 2."""
    try:
        sys.exit(main())
    except SweepError as e:
        print(f"{os.path.basename(sys.argv[0])}: {e}", file=sys.stderr)
        sys.exit(2)


# ---- the command line ----

def sweep_parser(prog, doc, grid_required):
    """An argument parser with the flags both sweeps take: --example, --bin-dir, --grid."""
    parser = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", required=True, help="an example's name (build/examples/NAME) or an executable")
    parser.add_argument("--bin-dir", help="where the examples are built (default: build/examples of this checkout)")
    parser.add_argument("--grid", action="append", metavar="KEY=V1,V2", required=grid_required,
                        help="a flag and its values; repeat for more (--grid=-mb=3,6 for a single-dash flag)")
    return parser


def parse_with_passthrough(parser, argv):
    """The sweep's own arguments before `--`; those after it, for every run, in args.passthrough."""
    own, passthrough = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser.parse_args(own)
    args.passthrough = passthrough
    return args


# ---- the grid ----

def parse_grid(specs):
    """--grid KEY=V1,V2,... (repeatable) as [(key, [values])], in the order given. KEY is an
    example flag: 'batch' stands for --batch, '-mb' is passed as it is."""
    grid = []
    for spec in specs or []:
        key, sep, values = spec.partition("=")
        key = key.strip()
        parsed = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key or not parsed:
            raise SweepError(f"--grid '{spec}': expected KEY=V1,V2,... (a flag name and at least one value)")
        if key in (k for k, _ in grid):
            raise SweepError(f"--grid '{spec}': {key} is already in the grid")
        if len(set(parsed)) != len(parsed):
            raise SweepError(f"--grid '{spec}': a value is listed twice")
        grid.append((key, parsed))
    return grid


def parse_axes(specs, grid):
    """--axis NAME=FLAG1,FLAG2,...:V1,V2,... (repeatable) as ([(NAME, [values])], {NAME: [flags]}): one
    axis of the grid, under its own NAME, that sets every one of its flags to the same value
    (lr=--lr-head1,--lr-head2:1e-3,1e-4 trains each head at 1e-3, then each at 1e-4)."""
    axes, flags = [], {}
    taken = {k for k, _ in grid}
    for spec in specs or []:
        name, sep, rest = spec.partition("=")
        name = name.strip()
        flag_list, colon, values = rest.partition(":")
        named = [f.strip() for f in flag_list.split(",") if f.strip()]
        parsed = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not colon or not name or not named or not parsed:
            raise SweepError(f"--axis '{spec}': expected NAME=FLAG1,FLAG2,...:V1,V2,... (a name, the flags it sets "
                             "and at least one value)")
        if name in taken:
            raise SweepError(f"--axis '{spec}': {name} is already in the grid")
        if any(not f.startswith("-") for f in named):
            raise SweepError(f"--axis '{spec}': each flag is written as the example takes it (--lr-head1, -lr)")
        if len(set(named)) != len(named) or len(set(parsed)) != len(parsed):
            raise SweepError(f"--axis '{spec}': a flag or a value is listed twice")
        taken.add(name)
        axes.append((name, parsed))
        flags[name] = named
    return axes, flags


def grid_points(grid):
    """Every point of the grid, as dicts key -> value, the last key varying fastest."""
    keys = [k for k, _ in grid]
    return [dict(zip(keys, values)) for values in itertools.product(*(v for _, v in grid))]


def flag(key):
    return key if key.startswith("-") else "--" + key


def point_flags(point, axes=None):
    """The example's flags for a point; an --axis (parse_axes's flags) sets each of its flags."""
    axes = axes or {}
    return [part for key, value in point.items() for name in axes.get(key, [flag(key)]) for part in (name, value)]


def parse_counts(text, option):
    """'1,2,4' as [1, 2, 4]; each a positive integer."""
    try:
        counts = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        counts = []
    if not counts or any(c < 1 for c in counts):
        raise SweepError(f"{option} '{text}': expected positive process counts, e.g. 1,2,4")
    return counts


# ---- the example and the output directory ----

def known_examples():
    return sorted(name[:-4] for name in os.listdir(os.path.join(REPO, "examples")) if name.endswith(".cpp"))


def example_binary(name, bin_dir):
    """The built example NAME in bin_dir (default: build/examples of this checkout); a path is
    taken as it is."""
    if not shutil.which("mpiexec"):
        raise SweepError("mpiexec is not on PATH: the sweeps start every run with it (Debian: mpich)")
    if os.sep in name:
        if not os.access(name, os.X_OK):
            raise SweepError(f"--example {name}: not an executable file")
        return os.path.abspath(name)
    examples = known_examples()
    if name not in examples:
        raise SweepError(f"--example {name}: unknown example; expected one of {', '.join(examples)} "
                         "(or the path of an executable)")
    path = os.path.join(bin_dir or os.path.join(REPO, "build", "examples"), name)
    if not os.access(path, os.X_OK):
        raise SweepError(f"--example {name}: {path} is not built (cmake --build build --target {name}; "
                         "--bin-dir names another build's examples directory)")
    return path


def writable_dir(path):
    """Creates path if needed and proves it writable, or says why not."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
    except OSError as e:
        raise SweepError(f"--out {path}: cannot write there ({e.strerror or e})") from None
    return os.path.abspath(path)


def write_atomically(path, write, mode="w"):
    """Calls write(file) on a temporary beside path (opened with mode, "w" or "wb"), then renames it
    over path: a reader sees the old file or the whole new one. The file gets the umask's mode."""
    directory = os.path.dirname(os.path.abspath(path))
    blocked = block_stop_signals()  # a sweep stopped meanwhile stops after the rename
    fd, temp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, mode, **({"newline": ""} if "b" not in mode else {})) as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def write_text(path, text):
    write_atomically(path, lambda out: out.write(text))


def write_csv(path, columns, rows):
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: format_value(row.get(c, "")) for c in columns})
    write_text(path, text.getvalue())


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def format_value(value):
    if isinstance(value, float):
        return "" if value != value else f"{value:.6g}"
    return value


def markdown_table(columns, rows, headers=None):
    """columns of rows as a Markdown table; headers renames some columns."""
    def cell(value):
        return str(format_value(value)).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join((headers or {}).get(c, c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# ---- one run ----

FINAL = re.compile(r"^final (.+) (-?(?:[0-9.]+(?:e[-+]?[0-9]+)?|nan|inf))(%?)$", re.IGNORECASE)
PEAK = re.compile(r"^peak memory ([0-9.]+) MiB")
TOTAL = re.compile(r"^total run time ([0-9.]+) s$")


def run_example(binary, procs, flags, run_dir, timeout, cpus=None, env=None):
    """Runs `mpiexec -n procs binary flags --csv run_dir/epochs.csv`, its output in run_dir/output.log,
    pinned to cpus (a set of CPU numbers) when given, with env added to the environment. Returns a
    dict: status (ok / failed), error, final_metric_name, final_metric, peak_memory_mib,
    total_seconds, epochs (the CSV log's rows, each a dict of floats), log (the output's path)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    epochs_csv = os.path.join(run_dir, "epochs.csv")
    command = ["mpiexec", "-n", str(procs), binary, *flags, "--csv", epochs_csv]
    log_path = os.path.join(run_dir, "output.log")
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()

        def in_child():  # the signals unblocked (a trial's thread blocks them), pinned to cpus
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            if cpus:
                os.sched_setaffinity(0, cpus)
        with _running_lock:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                       env={**os.environ, **(env or {})}, preexec_fn=in_child)
            _running.add(process)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
        finally:
            with _running_lock:
                _running.discard(process)
    with open(log_path, errors="replace") as log:
        output = log.read().splitlines()
    result = {"status": "ok", "error": "", "final_metric_name": "", "final_metric": float("nan"),
              "peak_memory_mib": float("nan"), "total_seconds": float("nan"), "epochs": [], "log": log_path}
    for line in output:
        if m := FINAL.match(line):
            result["final_metric_name"], result["final_metric"] = m.group(1), float(m.group(2))
        elif m := PEAK.match(line):
            result["peak_memory_mib"] = float(m.group(1))
        elif m := TOTAL.match(line):
            result["total_seconds"] = float(m.group(1))
    if os.path.exists(epochs_csv):
        result["epochs"] = [{k: float(v) for k, v in row.items()} for row in read_csv(epochs_csv)]
    if code != 0:
        result["status"] = "failed"
        result["error"] = (f"timed out after {timeout} s" if code is None else
                           f"exit code {code}: {last_message(output[1:])}")
    elif not result["final_metric_name"]:
        result["status"] = "failed"
        result["error"] = "exit code 0 but no 'final <metric> <value>' line (is it a ptrain example?)"
    return result


def last_message(lines):
    """The line that says why a run failed: the last one naming an error, else the last one."""
    lines = [line.strip() for line in lines if line.strip()]
    noise = re.compile(r"^(=+|BAD TERMINATION|YOUR APPLICATION TERMINATED|PID \d+|EXIT CODE|CLEANING UP|"
                       r"This typically refers|Please see the FAQ)", re.IGNORECASE)
    meaningful = [line for line in lines if not noise.match(line)]
    for line in reversed(meaningful):
        if re.search(r"error|expected|must|cannot|not |fail", line, re.IGNORECASE):
            return line
    return meaningful[-1] if meaningful else "no output"


def last_epoch(result, column):
    return result["epochs"][-1].get(column, float("nan")) if result["epochs"] else float("nan")


# The runs under way, each in a session of its own (so that a timeout ends all of its ranks): a
# sweep stopped by SIGTERM or SIGINT ends them and exits at once, though not while it writes a file
# (write_atomically blocks the signals) and only in the main thread (the others block them).
_running = set()
_running_lock = threading.RLock()  # the handler runs in the main thread, which may hold the lock
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def block_stop_signals():
    """Blocks SIGTERM and SIGINT in this thread; returns the mask before."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def stop_runs_on_signals():
    def stop(signum, _frame):
        with _running_lock:
            for process in _running:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        print(f"{os.path.basename(sys.argv[0])}: stopped by signal {signum}; the runs under way were ended",
              file=sys.stderr, flush=True)
        os._exit(128 + signum)
    for signum in STOP_SIGNALS:
        signal.signal(signum, stop)
