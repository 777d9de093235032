"""The sweeps of tools/ end to end over fashion_mnist on the tiny generated data (make_example_data's
fashion_mnist/): their CSVs, Markdown, PNG plots (decoded by matplotlib's reader), failed runs as
rows with their errors, the errors of bad arguments, and the hyper-parameter sweep's seeded draw,
its trials on disjoint CPUs and its resumption after being killed.

usage: sweep_test.py benchmark|hyper EXAMPLES_DIR DATA_DIR WORK_DIR   (with Debian's python3 and
python3-matplotlib: scripts/setup.sh installs it)
"""
import csv
import os
import shutil
import signal
import subprocess
import sys
import time

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")


def fail(message):
    print("sweep_test: FAILED: " + message, file=sys.stderr)
    sys.exit(1)


def expect(condition, message):
    if not condition:
        fail(message)


def tool(name, *args, expect_code=0):
    result = subprocess.run([sys.executable, os.path.join(TOOLS, name), *args], capture_output=True, text=True)
    output = result.stdout + result.stderr
    print(output)
    expect(result.returncode == expect_code, f"{name} {' '.join(args)} exited {result.returncode}, "
                                             f"expected {expect_code}")
    return output


def rows_of(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def check_png(path):
    import matplotlib.pyplot as plt
    expect(os.path.getsize(path) > 5000, f"{path}: {os.path.getsize(path)} bytes, expected a real plot")
    image = plt.imread(path)  # decodes the PNG (Pillow under matplotlib)
    expect(image.ndim == 3 and image.shape[0] >= 200 and image.shape[1] >= 200, f"{path}: shape {image.shape}")
    colours = {tuple(pixel) for pixel in image.reshape(-1, image.shape[2])[::7].tolist()}
    expect(len(colours) > 20, f"{path}: {len(colours)} colours: a blank image, not a plot")


def benchmark(bin_dir, data, work):
    out = os.path.join(work, "benchmark")
    shutil.rmtree(out, ignore_errors=True)
    common = ["--example", "fashion_mnist", "--bin-dir", bin_dir]
    # batch 63 does not divide over 2 ranks: that run fails, and is a row with its error.
    tool("sweep.py", *common, "--procs", "1,2", "--grid", "batch=32,63", "--out", out, "--",
         "--data", data, "--epochs", "1", "--lr", "0.003")
    columns, rows = rows_of(os.path.join(out, "sweep.csv"))
    expect(columns == ["run", "procs", "batch", "status", "error", "metric", "images_per_second", "epoch_seconds",
                       "final_metric", "peak_memory_mib", "total_seconds", "speedup", "efficiency", "log"],
           f"sweep.csv columns {columns}")
    expect([(r["procs"], r["batch"], r["status"]) for r in rows] ==
           [("1", "32", "ok"), ("2", "32", "ok"), ("1", "63", "ok"), ("2", "63", "failed")],
           f"sweep.csv runs {[(r['procs'], r['batch'], r['status']) for r in rows]}")
    for row in rows[:3]:
        expect(row["metric"] == "test accuracy" and 0 <= float(row["final_metric"]) <= 100, f"metric in {row}")
        for column in ("images_per_second", "epoch_seconds", "peak_memory_mib", "total_seconds"):
            expect(float(row[column]) > 0, f"{row['run']}: {column} {row[column]}")
        expect(float(row["peak_memory_mib"]) < 4096, f"{row['run']}: peak memory {row['peak_memory_mib']} MiB")
        expect(os.path.exists(os.path.join(out, row["log"])), f"{row['run']}: no log {row['log']}")
    one, two = rows[0], rows[1]
    speedup = float(two["images_per_second"]) / float(one["images_per_second"])
    expect(float(one["speedup"]) == 1 and abs(float(two["speedup"]) - speedup) < 1e-3 * speedup and
           abs(float(two["efficiency"]) - speedup / 2) < 1e-3 * speedup, f"speed-up and efficiency of {two}")
    failed = rows[3]
    expect("exit code 1" in failed["error"] and "--batch 63 (the global batch) must divide by the 2" in failed["error"],
           f"the failed run's error: {failed['error']!r}")
    expect(failed["images_per_second"] == "" and failed["speedup"] == "", f"the failed run's results: {failed}")

    with open(os.path.join(out, "sweep.md")) as f:
        table = [line for line in f if line.startswith("|")]
    expect(table[0].startswith("| run | procs | batch | status | images/s |") and "test accuracy" in table[0],
           f"sweep.md header {table[0]!r}")
    expect(len(table) == 2 + len(rows), f"sweep.md: {len(table)} table lines for {len(rows)} runs")
    expect("| run-004 | 2 | 63 | failed |" in table[5] and "must divide by the 2" in table[5], f"{table[5]!r}")
    for plot in ("throughput_vs_batch", "speedup_vs_procs", "metric_vs_procs", "time_and_metric_vs_batch"):
        check_png(os.path.join(out, plot + ".png"))

    # Bad arguments: one clear line each, exit code 2, nothing run.
    bad = os.path.join(work, "never_written")
    message = tool("sweep.py", "--example", "no_such_example", "--out", bad, expect_code=2)
    expect("--example no_such_example: unknown example; expected one of" in message and "fashion_mnist" in message,
           "an unknown example")
    message = tool("sweep.py", *common, "--grid", "batch=,", "--out", bad, expect_code=2)
    expect("--grid 'batch=,': expected KEY=V1,V2,..." in message, "a grid that parses to nothing")
    not_a_dir = os.path.join(out, "sweep.csv", "out")
    message = tool("sweep.py", *common, "--out", not_a_dir, expect_code=2)
    expect(f"--out {not_a_dir}: cannot write there (Not a directory)" in message, "an unwritable --out")
    expect(not os.path.exists(bad), f"{bad} was written by a refused sweep")


FAKE_EXAMPLE = """#!/bin/sh
# Stands in for an example: says which CPUs it may use and a metric from its --x flag.
grep Cpus_allowed_list /proc/self/status
sleep 1
echo "final fake metric $2"
echo "peak memory 1.0 MiB (the largest resident set of 1 rank(s))"
echo "total run time 1.0 s"
"""


def hyper(bin_dir, data, work):
    grid = ["--grid", "batch=16,32,64", "--grid", "lr=0.01,0.003,0.001", "--grid", "seed=1,2"]
    draws = [tool("hyper_sweep.py", "--example", "fashion_mnist", *grid, "--sample", "3", "--seed", seed,
                  "--epochs", "1", "--out", "unused", "--list") for seed in ("7", "7", "8")]
    expect(draws[0] == draws[1], "the same --seed drew other points")
    expect(draws[0] != draws[2], "--seed 7 and --seed 8 drew the same points")
    expect(len(draws[0].splitlines()) == 3 and len(set(draws[0].splitlines())) == 3, f"3 distinct trials: {draws[0]}")

    # An --axis sets each of its flags to the point's value; it crosses the --grid as a key does.
    listed = tool("hyper_sweep.py", "--example", "triplet_transfer", "--grid", "batch=8,16", "--axis",
                  "heads=--lr-instrument,--lr-verb,--lr-target:1e-2,1e-3", "--epochs", "1", "--out", "unused",
                  "--list").splitlines()
    expect(listed == ["trial-001 --batch 8 --lr-instrument 1e-2 --lr-verb 1e-2 --lr-target 1e-2",
                      "trial-002 --batch 8 --lr-instrument 1e-3 --lr-verb 1e-3 --lr-target 1e-3",
                      "trial-003 --batch 16 --lr-instrument 1e-2 --lr-verb 1e-2 --lr-target 1e-2",
                      "trial-004 --batch 16 --lr-instrument 1e-3 --lr-verb 1e-3 --lr-target 1e-3"],
           f"the --axis trials: {listed}")
    for axis, error in (("heads=--lr-verb", "expected NAME=FLAG1,FLAG2,...:V1,V2"),
                        ("heads=lr-verb:1", "each flag is written as the example takes it"),
                        ("batch=--lr:1", "batch is already in the grid")):
        message = tool("hyper_sweep.py", "--example", "fashion_mnist", "--grid", "batch=8", "--axis", axis,
                       "--epochs", "1", "--out", "unused", "--list", expect_code=2)
        expect(error in message, f"--axis {axis}: {message}")

    # Trials on disjoint CPUs: 2 processes, trials of 1, the fake example reporting its CPUs.
    fake = os.path.join(work, "fake_example.sh")
    with open(fake, "w") as f:
        f.write(FAKE_EXAMPLE)
    os.chmod(fake, 0o755)
    out = os.path.join(work, "hyper_pinned")
    shutil.rmtree(out, ignore_errors=True)
    message = tool("hyper_sweep.py", "--example", fake, "--grid", "x=1,2", "--epochs", "1", "--procs", "2",
                   "--out", out)
    expect("2 to run, 2 at a time" in message, "two trials at once")
    allowed = []
    for trial in ("trial-001", "trial-002"):
        with open(os.path.join(out, "trials", trial, "output.log")) as f:
            allowed.append(next(line.split()[1] for line in f if line.startswith("Cpus_allowed_list")))
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        expect(allowed[0] != allowed[1], f"both trials ran on CPUs {allowed[0]}")
    _, rows = rows_of(os.path.join(out, "trials.csv"))
    expect([(r["x"], r["final_metric"]) for r in rows] == [("1", "1"), ("2", "2")], f"trials.csv rows {rows}")
    with open(os.path.join(out, "summary.md")) as f:
        expect("Best configuration (largest fake metric): x 2: fake metric 2" in f.read(), "summary.md's best")

    # 3 random points of fashion_mnist, killed after the first trial, then resumed.
    out = os.path.join(work, "hyper")
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, os.path.join(TOOLS, "hyper_sweep.py"), "--example", "fashion_mnist", "--bin-dir",
               bin_dir, *grid, "--sample", "3", "--seed", "7", "--epochs", "2", "--out", out, "--", "--data", data]
    results = os.path.join(out, "trials.csv")
    sweep = subprocess.Popen(command)
    deadline = time.monotonic() + 120
    while not (os.path.exists(results) and len(rows_of(results)[1]) >= 1):
        expect(sweep.poll() is None and time.monotonic() < deadline, "the sweep ended before its first trial did")
        time.sleep(0.05)
    sweep.send_signal(signal.SIGTERM)
    expect(sweep.wait() == 128 + signal.SIGTERM, f"the killed sweep exited {sweep.returncode}")
    with open(results) as f:
        before = f.read().splitlines()
    finished = [line.split(",")[0] for line in before[1:]]
    expect(1 <= len(finished) < 3, f"the killed sweep left {finished}")
    logs = {t: os.stat(os.path.join(out, "trials", t, "output.log")).st_mtime_ns for t in finished}
    resumed = subprocess.run(command, capture_output=True, text=True)
    print(resumed.stdout + resumed.stderr)
    expect(resumed.returncode == 0, f"the resumed sweep exited {resumed.returncode}")
    expect(f"3 trials, {len(finished)} already in {results}, {3 - len(finished)} to run" in resumed.stdout,
           "the resumed sweep did not say what it skipped")
    for trial in finished:
        expect(f"{trial} " not in resumed.stdout, f"the resumed sweep ran {trial} again")
        expect(os.stat(os.path.join(out, "trials", trial, "output.log")).st_mtime_ns == logs[trial],
               f"{trial}'s log was rewritten")
    with open(results) as f:
        after = f.read().splitlines()
    expect(len(after) == 4, f"trials.csv: {len(after) - 1} trials")
    expect(all(line in after for line in before[1:]), "the finished trials' rows changed")
    columns, rows = rows_of(results)
    expect(columns[:10] == ["trial", "batch", "lr", "seed", "status", "error", "metric", "final_metric",
                            "total_seconds", "epochs_done"] and columns[10:] == [
        "epoch1_val_loss", "epoch1_val_accuracy", "epoch2_val_loss", "epoch2_val_accuracy"], f"columns {columns}")
    listed = [line.split(" ", 1)[1] for line in draws[0].splitlines()]
    expect([f"--batch {r['batch']} --lr {r['lr']} --seed {r['seed']}" for r in rows] == listed,
           "the trials are not the seeded draw")
    for row in rows:
        expect(row["status"] == "ok" and row["epochs_done"] == "2" and float(row["total_seconds"]) > 0, f"{row}")
        expect(abs(float(row["final_metric"]) - 100 * float(row["epoch2_val_accuracy"])) < 1e-3,
               f"the final metric of {row} is not the last epoch's validation accuracy")
    best = max(rows, key=lambda r: float(r["final_metric"]))
    with open(os.path.join(out, "summary.md")) as f:
        expect(f"Best configuration (largest test accuracy): batch {best['batch']}, lr {best['lr']}, seed "
               f"{best['seed']}: test accuracy {float(best['final_metric']):.4g}" in f.read(), "summary.md's best")
    for key in ("batch", "lr", "seed"):
        check_png(os.path.join(out, f"param_{key}.png"))
    message = tool("hyper_sweep.py", *command[2:-5], "--epochs", "3", "--out", out, "--", "--data", data,
                   expect_code=2)
    expect("holds another sweep's trials (its epochs differ)" in message, "another sweep into the same --out")


def main():
    mode, bin_dir, data, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    {"benchmark": benchmark, "hyper": hyper}[mode](bin_dir, data, work)
    print(f"sweep_test {mode}: passed")


if __name__ == "__main__":
    main()
