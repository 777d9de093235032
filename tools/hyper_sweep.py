#!/usr/bin/python3
"""Hyper-parameter sweep: trains a ptrain example once per point of a grid, or of --sample N points
drawn from it with --seed, each for an epoch budget. With --procs N and --trial-procs K, N/K trials
run at once, each on K ranks pinned to its own share of the CPUs (and PTRAIN_NUM_THREADS set to
that share per rank, unless it is set). Writes OUT/trials.csv (a row per trial: its configuration,
the per-epoch validation metrics, the final metric and time; a failed trial with its error),
OUT/summary.md (the best configuration first) and a plot per parameter (param_KEY.png).

A sweep stopped part way goes on where it stopped when run again with the same arguments: the
trials already in OUT/trials.csv, failed ones too, are not run again (delete a row to run its trial
again; OUT/sweep.json records the sweep, and another sweep's arguments are refused there).

for example: hyper_sweep.py --example fashion_mnist --grid batch=32,64,128 --grid lr=0.01,0.001,0.0001
                             --sample 5 --seed 1 --epochs 10 --procs 4 --trial-procs 1 --out DIR [-- FLAGS...]
An --axis sets several flags to one value at each point, under a name of its own (the column of
trials.csv): --axis heads=--lr-instrument,--lr-verb,--lr-target:1e-2,1e-3 trains every head at 1e-2,
then every head at 1e-3.
"""
import concurrent.futures
import json
import os
import random
import shlex
import sys

import sweep_plots
from sweep_runs import (SweepError, block_stop_signals, example_binary, grid_points, main_guard, markdown_table,
                        parse_axes, parse_grid, parse_with_passthrough, point_flags, read_csv, run_example,
                        stop_runs_on_signals, sweep_parser, writable_dir, write_csv, write_text)


def parse_args(argv):
    parser = sweep_parser("hyper_sweep.py", __doc__, grid_required=False)
    parser.add_argument("--axis", action="append", metavar="NAME=FLAG1,FLAG2:V1,V2",
                        help="one axis of the grid that sets each of its flags to the same value; repeat for more")
    parser.add_argument("--sample", type=int, default=0, help="train N points drawn from the grid (0: all of it)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    parser.add_argument("--epochs", type=int, required=True, help="the epoch budget of each trial")
    parser.add_argument("--epochs-flag", default="--epochs",
                        help="the example's epochs flag (vggf_coil100: --epochs-flag=-ep)")
    parser.add_argument("--procs", type=int, default=1, help="processes in all (default 1)")
    parser.add_argument("--trial-procs", type=int, default=1, help="processes of each trial (default 1)")
    parser.add_argument("--goal", choices=["auto", "max", "min"], default="auto",
                        help="whether the best final metric is the largest or the smallest (auto: min for a "
                             "perplexity or loss, else max)")
    parser.add_argument("--out", required=True, help="directory for trials.csv, summary.md, the plots and trials/")
    parser.add_argument("--timeout", type=float, default=24 * 3600, help="seconds before a trial is stopped")
    parser.add_argument("--list", action="store_true", help="print the trials' configurations and stop")
    args = parse_with_passthrough(parser, argv)
    if args.sample < 0 or args.epochs < 1 or args.procs < 1 or args.trial_procs < 1:
        parser.error("--sample must be at least 0, --epochs, --procs and --trial-procs at least 1")
    if args.procs % args.trial_procs:
        parser.error(f"--procs {args.procs} does not divide into trials of --trial-procs {args.trial_procs}")
    return args


def sampled_points(grid, sample, seed):
    """The trials: all of the grid, or `sample` distinct points of it drawn with seed (random.Random:
    the same draw on every Python 3)."""
    points = grid_points(grid)
    if not sample or sample >= len(points):
        return points
    return [points[i] for i in random.Random(seed).sample(range(len(points)), sample)]


def cpu_groups(groups, ranks_per_group):
    """The CPUs of each group of ranks: the CPUs this process may use, split evenly over the ranks
    (a rank per CPU, round robin, when there are more ranks than CPUs)."""
    cpus = sorted(os.sched_getaffinity(0))
    ranks = groups * ranks_per_group
    if ranks > len(cpus):
        per_rank = [{cpus[r % len(cpus)]} for r in range(ranks)]
    else:
        per_rank = [set(cpus[r * len(cpus) // ranks:(r + 1) * len(cpus) // ranks]) for r in range(ranks)]
    return [set().union(*per_rank[g * ranks_per_group:(g + 1) * ranks_per_group]) for g in range(groups)]


def configuration_key(point):
    return json.dumps(point, sort_keys=True)


def check_same_sweep(out, spec):
    """OUT/sweep.json: this sweep's arguments, written once; a second run must match them."""
    path = os.path.join(out, "sweep.json")
    spec = json.loads(json.dumps(spec))  # as read back: lists for tuples
    if os.path.exists(path):
        with open(path) as f:
            recorded = json.load(f)
        if recorded != spec:
            differing = sorted(k for k in set(recorded) | set(spec) if recorded.get(k) != spec.get(k))
            raise SweepError(f"{path}: {out} holds another sweep's trials (its {', '.join(differing)} differ); "
                             "run this one with another --out")
    else:
        write_text(path, json.dumps(spec, indent=2) + "\n")


def trial_row(name, point, result):
    row = {"trial": name, **point, "status": result["status"], "error": result["error"],
           "metric": result["final_metric_name"], "final_metric": result["final_metric"],
           "total_seconds": result["total_seconds"], "epochs_done": len(result["epochs"])}
    for epoch in result["epochs"]:
        for column in ("val_loss", *(c for c in epoch if c.startswith("val_") and c != "val_loss")):
            row[f"epoch{int(epoch['epoch'])}_{column}"] = epoch[column]
    return row


def per_epoch_columns(rows, epochs):
    names = list(dict.fromkeys(k.split("_", 1)[1] for row in rows for k in row if k.startswith("epoch") and
                               k[5:6].isdigit()))
    return [f"epoch{e}_{name}" for e in range(1, epochs + 1) for name in names]


def best_rows(rows, goal):
    done = [row for row in rows if row["status"] == "ok" and float(row["final_metric"]) == float(row["final_metric"])]
    if goal == "auto":
        name = next((row["metric"] for row in done), "")
        goal = "min" if "perplexity" in name or "loss" in name else "max"
    return sorted(done, key=lambda row: float(row["final_metric"]), reverse=goal == "max"), goal


def write_outputs(out, keys, rows, epochs, goal, command):
    columns = ["trial", *keys, "status", "error", "metric", "final_metric", "total_seconds", "epochs_done",
               *per_epoch_columns(rows, epochs)]
    rows = sorted(rows, key=lambda row: row["trial"])
    write_csv(os.path.join(out, "trials.csv"), columns, rows)
    ranked, goal = best_rows(rows, goal)
    metric = next((row["metric"] for row in ranked), "final metric")
    summary = ["# Hyper-parameter sweep", "", f"`{command}`", ""]
    if ranked:
        best = ranked[0]
        summary += [f"Best configuration ({'largest' if goal == 'max' else 'smallest'} {metric}): " +
                    ", ".join(f"{k} {best[k]}" for k in keys) + f": {metric} {float(best['final_metric']):.4g} "
                    f"({best['trial']}, {float(best['total_seconds']):.1f} s)", ""]
    else:
        summary += ["No trial finished.", ""]
    failed = [row for row in rows if row["status"] != "ok"]
    summary += [f"{len(rows)} trials, {len(failed)} failed, best first:", "",
                markdown_table(["trial", *keys, "final_metric", "total_seconds", "status", "error"], ranked + failed,
                               {"final_metric": metric, "total_seconds": "time s"})]
    plots = sweep_plots.parameter_plots(rows, keys, out, metric)
    summary += ["## A plot per parameter", ""] + [f"- [{name}]({name})" for name in plots]
    write_text(os.path.join(out, "summary.md"), "\n".join(summary) + "\n")
    return ranked


def main():
    args = parse_args(sys.argv[1:])
    if not args.grid and not args.axis:
        raise SweepError("no grid: give at least one --grid KEY=V1,V2 or --axis NAME=FLAG1,FLAG2:V1,V2")
    grid = parse_grid(args.grid)
    axes, axis_flags = parse_axes(args.axis, grid)
    grid += axes
    keys = [k for k, _ in grid]
    points = sampled_points(grid, args.sample, args.seed)
    trials = [(f"trial-{i:03d}", point) for i, point in enumerate(points, 1)]
    if args.list:
        for name, point in trials:
            print(name, " ".join(point_flags(point, axis_flags)))
        return 0
    binary = example_binary(args.example, args.bin_dir)
    out = writable_dir(args.out)
    spec = {"example": os.path.basename(binary), "grid": grid, "sample": args.sample, "seed": args.seed,
            "epochs": args.epochs, "epochs_flag": args.epochs_flag, "trial_procs": args.trial_procs,
            "flags": args.passthrough}
    if axis_flags:  # absent otherwise, as sweeps recorded before --axis existed
        spec["axes"] = axis_flags
    check_same_sweep(out, spec)
    results_path = os.path.join(out, "trials.csv")
    rows = read_csv(results_path) if os.path.exists(results_path) else []
    done = {configuration_key({k: row[k] for k in keys}) for row in rows}
    to_run = [(name, point) for name, point in trials if configuration_key(point) not in done]
    groups = args.procs // args.trial_procs
    print(f"hyper_sweep: {len(trials)} trials, {len(trials) - len(to_run)} already in {results_path}, "
          f"{len(to_run)} to run, {min(groups, max(len(to_run), 1))} at a time", flush=True)
    command = " ".join(shlex.quote(a) for a in ["hyper_sweep.py", *sys.argv[1:]])
    stop_runs_on_signals()
    free = cpu_groups(groups, args.trial_procs)
    threads_per_rank = str(max(1, min(len(cpus) for cpus in free) // args.trial_procs))
    env = {} if "PTRAIN_NUM_THREADS" in os.environ else {"PTRAIN_NUM_THREADS": threads_per_rank}

    def run(name, point, cpus):
        flags = point_flags(point, axis_flags) + [args.epochs_flag, str(args.epochs)] + args.passthrough
        return run_example(binary, args.trial_procs, flags, os.path.join(out, "trials", name), args.timeout, cpus, env)

    pending = list(to_run)
    with concurrent.futures.ThreadPoolExecutor(max_workers=groups, initializer=block_stop_signals) as pool:
        running = {}
        while pending or running:
            while pending and free:
                name, point = pending.pop(0)
                cpus = free.pop(0)
                running[pool.submit(run, name, point, cpus)] = (name, point, cpus)
            finished, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in finished:
                name, point, cpus = running.pop(future)
                free.append(cpus)
                rows.append(trial_row(name, point, future.result()))
                row = rows[-1]
                print(f"{name} {' '.join(point_flags(point, axis_flags))}: {row['status']}" +
                      (f": {row['error']}" if row["error"] else f": {row['metric']} {row['final_metric']:.4g}"),
                      flush=True)
                write_outputs(out, keys, rows, args.epochs, args.goal, command)  # kept as each trial ends
    ranked = write_outputs(out, keys, rows, args.epochs, args.goal, command)
    if ranked:
        best = ranked[0]
        print(f"hyper_sweep: best {' '.join(point_flags({k: best[k] for k in keys}, axis_flags))}: "
              f"{best['metric']} {float(best['final_metric']):.4g}; {out}/summary.md")
    else:
        print(f"hyper_sweep: no trial finished; {out}/summary.md")
    return 0


if __name__ == "__main__":
    main_guard(main)
