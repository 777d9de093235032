"""The sweeps' PNG plots, drawn by matplotlib (Debian's python3-matplotlib, which scripts/setup.sh
installs) from the rows the sweeps also write to CSV. Each plot is written to a temporary beside its
path and renamed over it."""
import os

from sweep_runs import SweepError, write_atomically


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise SweepError(f"cannot import matplotlib ({e}): install Debian's python3-matplotlib "
                         "(scripts/setup.sh does) and run the sweep with /usr/bin/python3") from None
    return plt


def save(figure, path):
    try:
        write_atomically(path, lambda out: figure.savefig(out, format="png", dpi=100, bbox_inches="tight"), "wb")
    finally:
        pyplot().close(figure)


def as_number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def positions(values):
    """x positions of a parameter's values: the values when all are numbers, else their order."""
    values = list(dict.fromkeys(values))
    numbers = [as_number(v) for v in values]
    if all(n is not None for n in numbers):
        return {v: n for v, n in zip(values, numbers)}, None
    return {v: i for i, v in enumerate(values)}, values


def log_scale_if_wide(axes, xs):
    """A log x axis for positive values spanning 8x or more (learning rates, batches 32 ... 1024)."""
    if xs and min(xs) > 0 and max(xs) >= 8 * min(xs):
        axes.set_xscale("log")


def series(rows, x_key, y_key, group_keys):
    """{label: [(x, y)...]}: the rows with a y grouped by the other keys' values, sorted by x."""
    groups = {}
    for row in rows:
        y = as_number(row.get(y_key))
        if y is None or y != y:
            continue
        label = ", ".join(f"{k} {row[k]}" for k in group_keys) or y_key
        groups.setdefault(label, []).append((row[x_key], y))
    where, _ = positions([row[x_key] for row in rows])
    return {label: sorted((where[x], y) for x, y in points) for label, points in groups.items()}


def line_plot(axes, rows, x_key, y_key, group_keys, ylabel):
    for label, points in series(rows, x_key, y_key, group_keys).items():
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    where, names = positions([row[x_key] for row in rows])
    if names:
        axes.set_xticks(range(len(names)), names)
    elif x_key != "procs":  # speed-up against processes: linear, as the ideal line is
        log_scale_if_wide(axes, list(where.values()))
    axes.set_xlabel(x_key)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize="small")


def figure(panels=1):
    plt = pyplot()
    fig, axes = plt.subplots(1, panels, figsize=(6.4 * panels, 4.8), squeeze=False)
    return fig, list(axes[0])


def benchmark_plots(rows, keys, out, batch_key, metric_name):
    """The benchmark sweep's plots (rows: one per run with procs, the grid keys, images_per_second,
    total_seconds, final_metric, speedup, efficiency). Returns [(file, what it shows)] written, and
    [(file, why not)] for those the sweep's axes cannot fill."""
    written, skipped = [], []
    procs = sorted({int(row["procs"]) for row in rows})
    batches = {row[batch_key] for row in rows} if batch_key in keys else set()
    others = [k for k in keys if k != batch_key]

    def plot(name, what, draw, needs, why):
        path = os.path.join(out, name)
        if not needs:
            skipped.append((name, why))
            return
        draw(path)
        written.append((name, what))

    def throughput(path):  # the Horovod table: images/s against batch per precision and process count
        fig, (axes,) = figure()
        line_plot(axes, rows, batch_key, "images_per_second", others + ["procs"], "images/s (all ranks)")
        axes.set_title("throughput against batch")
        save(fig, path)
    plot("throughput_vs_batch.png", "images/s against batch, a line per process count and other grid values",
         throughput, len(batches) > 1, f"needs 2 or more values of {batch_key} in the grid")

    def speedup(path):  # the UNet study: speed-up against GPUs next to the ideal line, and efficiency
        fig, (left, right) = figure(2)
        line_plot(left, rows, "procs", "speedup", keys,
                  f"speed-up over {procs[0]} process{'es' if procs[0] > 1 else ''}")
        left.plot(procs, [p / procs[0] for p in procs], linestyle="--", color="grey", label="ideal")
        left.legend(fontsize="small")
        line_plot(right, rows, "procs", "efficiency", keys, "parallel efficiency")
        right.axhline(1.0, linestyle="--", color="grey")
        for axes in (left, right):
            axes.set_xticks(procs)
        save(fig, path)
    plot("speedup_vs_procs.png", "speed-up against processes with the ideal line, and efficiency",
         speedup, len(procs) > 1, "needs 2 or more process counts (--procs)")

    def metric(path):
        fig, (axes,) = figure()
        line_plot(axes, rows, "procs", "final_metric", keys, metric_name)
        axes.set_xticks(procs)
        save(fig, path)
    plot("metric_vs_procs.png", f"{metric_name} against processes", metric, len(procs) > 1,
         "needs 2 or more process counts (--procs)")

    def time_and_accuracy(path):  # the VGG-F study: time and accuracy against mini-batch
        fig, (left, right) = figure(2)
        line_plot(left, rows, batch_key, "total_seconds", others + ["procs"], "total run time (s)")
        line_plot(right, rows, batch_key, "final_metric", others + ["procs"], metric_name)
        save(fig, path)
    plot("time_and_metric_vs_batch.png", f"total run time and {metric_name} against batch", time_and_accuracy,
         len(batches) > 1, f"needs 2 or more values of {batch_key} in the grid")
    return written, skipped


def parameter_plots(rows, keys, out, metric_name):
    """The hyper-parameter sweep's plot per parameter: each finished trial's final metric against the
    parameter's value, and the mean per value. Returns the files written."""
    written = []
    for key in keys:
        done = [row for row in rows if as_number(row.get("final_metric")) is not None]
        fig, (axes,) = figure()
        where, names = positions([row[key] for row in rows])
        xs = [where[row[key]] for row in done]
        ys = [float(row["final_metric"]) for row in done]
        axes.scatter(xs, ys, label="trials")
        means = sorted((x, sum(y for xx, y in zip(xs, ys) if xx == x) / xs.count(x)) for x in set(xs))
        axes.plot([m[0] for m in means], [m[1] for m in means], color="grey", linestyle="--", label="mean")
        if names:
            axes.set_xticks(range(len(names)), names)
        else:
            log_scale_if_wide(axes, list(where.values()))
        axes.set_xlabel(key)
        axes.set_ylabel(metric_name)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize="small")
        name = "param_" + "".join(c if c.isalnum() else "_" for c in key.lstrip("-")) + ".png"
        save(fig, os.path.join(out, name))
        written.append(name)
    return written
