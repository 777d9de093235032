#!/usr/bin/python3
"""Benchmark sweep: runs a ptrain example under mpiexec over a grid of process counts and flags,
one run at a time, and writes OUT/sweep.csv (a row per run, a failed run with its error),
OUT/sweep.md (the same as a Markdown table) and PNG plots (sweep_plots.py): throughput against
batch per process count and precision, speed-up and efficiency against processes with the ideal
line, the final metric against processes, run time and metric against batch.

for example: sweep.py --example fashion_mnist --procs 1,2,4 --grid batch=64,128,256 --grid compression=fp32,fp16
                     --out DIR [--bin-dir build/examples] [--batch-key batch] [--timeout S] [-- FLAGS...]
FLAGS after `--` go to every run (e.g. --epochs 2 --data DIR). images/s and the epoch time are
the last epoch's (the Trainer's, over all ranks); the final metric, peak memory (the largest rank's
resident set) and total run time are what run_example prints at the end.
"""
import os
import shlex
import sys

import sweep_plots
from sweep_runs import (SweepError, example_binary, grid_points, last_epoch, main_guard, markdown_table,
                        parse_counts, parse_grid, parse_with_passthrough, point_flags, run_example,
                        stop_runs_on_signals, sweep_parser, writable_dir, write_csv, write_text)

RESULTS = ["images_per_second", "epoch_seconds", "final_metric", "peak_memory_mib", "total_seconds", "speedup",
           "efficiency"]


def parse_args(argv):
    parser = sweep_parser("sweep.py", __doc__, grid_required=False)
    parser.add_argument("--procs", default="1", help="process counts, comma-separated (default 1)")
    parser.add_argument("--out", required=True, help="directory for sweep.csv, sweep.md, the plots and runs/")
    parser.add_argument("--batch-key", default="batch", help="the grid key that is the batch (default batch)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before a run is stopped (default 3600)")
    return parse_with_passthrough(parser, argv)


def add_speedups(rows, keys):
    """Speed-up over the smallest process count of the same grid point, and efficiency (speed-up
    over the ideal one)."""
    base = {}
    for row in rows:
        if row["status"] == "ok":
            point = tuple(row[k] for k in keys)
            if point not in base or row["procs"] < base[point]["procs"]:
                base[point] = row
    for row in rows:
        reference = base.get(tuple(row[k] for k in keys))
        if row["status"] == "ok" and reference and reference["images_per_second"] > 0:
            row["speedup"] = row["images_per_second"] / reference["images_per_second"]
            row["efficiency"] = row["speedup"] / (row["procs"] / reference["procs"])


def main():
    args = parse_args(sys.argv[1:])
    binary = example_binary(args.example, args.bin_dir)
    procs = parse_counts(args.procs, "--procs")
    grid = parse_grid(args.grid)
    keys = [k for k, _ in grid]
    if args.batch_key not in keys:
        args.batch_key = next((k for k in keys if k.lstrip("-") in ("batch", "mb", "batch-size")), args.batch_key)
    if {"procs", *RESULTS} & set(keys):
        raise SweepError(f"--grid: {sorted({'procs', *RESULTS} & set(keys))} name the sweep's own columns")
    out = writable_dir(args.out)
    stop_runs_on_signals()
    columns = ["run", "procs", *keys, "status", "error", "metric", *RESULTS, "log"]
    runs = [(point, p) for point in grid_points(grid) for p in procs]
    rows = []
    for number, (point, p) in enumerate(runs, 1):
        name = f"run-{number:03d}"
        described = ", ".join([f"procs {p}"] + [f"{k} {v}" for k, v in point.items()])
        print(f"[{number}/{len(runs)}] {described}", flush=True)
        result = run_example(binary, p, point_flags(point) + args.passthrough, os.path.join(out, "runs", name),
                             args.timeout)
        row = {"run": name, "procs": p, **point, "status": result["status"], "error": result["error"],
               "metric": result["final_metric_name"], "images_per_second": last_epoch(result, "images_per_second"),
               "epoch_seconds": last_epoch(result, "seconds"), "final_metric": result["final_metric"],
               "peak_memory_mib": result["peak_memory_mib"], "total_seconds": result["total_seconds"],
               "log": os.path.relpath(result["log"], out)}
        rows.append(row)
        print(f"    {result['status']}" + (f": {result['error']}" if result["error"] else
              f": {row['images_per_second']:.1f} images/s, {row['metric']} {row['final_metric']:.4g}"), flush=True)
        write_csv(os.path.join(out, "sweep.csv"), columns, rows)  # what finished survives an interrupted sweep
    add_speedups(rows, keys)
    write_csv(os.path.join(out, "sweep.csv"), columns, rows)
    metric = next((row["metric"] for row in rows if row["metric"]), "final metric")
    written, skipped = sweep_plots.benchmark_plots(rows, keys, out, args.batch_key, metric) if rows else ([], [])
    command = " ".join(shlex.quote(a) for a in ["sweep.py", *sys.argv[1:]])
    failed = sum(row["status"] != "ok" for row in rows)
    report = [f"# Sweep of {os.path.basename(binary)}", "", f"`{command}`", "",
              f"{len(rows)} runs, {failed} failed. images/s and epoch time: the last epoch, all ranks together; "
              "peak memory: the largest rank's resident set; speed-up over the fewest processes of the same "
              "grid point.", "",
              markdown_table(["run", "procs", *keys, "status", "images_per_second", "epoch_seconds", "final_metric",
                              "peak_memory_mib", "total_seconds", "speedup", "efficiency", "error"], rows,
                             {"images_per_second": "images/s", "epoch_seconds": "epoch s", "final_metric": metric,
                              "peak_memory_mib": "peak MiB", "total_seconds": "run time s", "speedup": "speed-up"})]
    report += ["## Plots", ""] + [f"- [{name}]({name}): {what}" for name, what in written]
    report += [f"- {name} not drawn: {why}" for name, why in skipped]
    write_text(os.path.join(out, "sweep.md"), "\n".join(report) + "\n")
    print(f"sweep: {len(rows)} runs ({failed} failed) in {out}/sweep.csv, sweep.md and {len(written)} plots")
    return 0


if __name__ == "__main__":
    main_guard(main)
