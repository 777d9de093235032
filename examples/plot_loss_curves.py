"""Draws the loss curves of training runs from their per-epoch CSV logs (an example's --csv), one
colour per run, training loss solid and validation loss dashed: the tripnet study's pretrained
against scratch comparison. With --heads, a second panel per head's validation accuracy.

usage: plot_loss_curves.py --out curves.png [--title T] [--heads instrument,verb,target] LABEL=LOG.csv ...
Run it through plot_loss_curves.sh, which installs Debian's python3-matplotlib when it is missing.
"""
import argparse
import csv
import math
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def read_log(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot_loss_curves: {path}: no epochs (expected a header and one row per epoch)")
    for column in ("epoch", "train_loss"):
        if column not in rows[0]:
            sys.exit(f"plot_loss_curves: {path}: no column '{column}' (found {', '.join(rows[0])})")
    return rows


def column(rows, name):
    return [float(r[name]) if r.get(name) not in (None, "") else math.nan for r in rows]


def main():
    parser = argparse.ArgumentParser(description="Loss curves of runs from their CSV logs")
    parser.add_argument("--out", required=True, help="PNG file to write")
    parser.add_argument("--title", default="Training and validation loss")
    parser.add_argument("--heads", default="", help="comma-separated heads whose val_<head>_accuracy to plot")
    parser.add_argument("runs", nargs="+", help="LABEL=LOG.csv")
    args = parser.parse_args()
    heads = [h for h in args.heads.split(",") if h]
    runs = []
    for run in args.runs:
        label, sep, path = run.partition("=")
        if not sep or not label or not path:
            sys.exit(f"plot_loss_curves: '{run}': expected LABEL=LOG.csv")
        runs.append((label, read_log(path)))

    panels = 2 if heads else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.5), squeeze=False)
    loss_axis = axes[0][0]
    for k, (label, rows) in enumerate(runs):
        colour = f"C{k}"
        epochs = column(rows, "epoch")
        loss_axis.plot(epochs, column(rows, "train_loss"), color=colour, marker="o", label=f"{label} train")
        if "val_loss" in rows[0]:
            loss_axis.plot(epochs, column(rows, "val_loss"), color=colour, linestyle="--", label=f"{label} validation")
        if heads:
            for h, head in enumerate(heads):
                name = f"val_{head}_accuracy"
                if name not in rows[0]:
                    sys.exit(f"plot_loss_curves: the log of '{label}' has no column '{name}'")
                axes[0][1].plot(epochs, [100 * v for v in column(rows, name)], color=colour,
                                linestyle=["-", "--", ":", "-."][h % 4], label=f"{label} {head}")
    loss_axis.set_xlabel("epoch")
    loss_axis.set_ylabel("loss (weighted sum of the heads')" if heads else "loss")
    loss_axis.set_title(args.title)
    loss_axis.grid(True, alpha=0.3)
    loss_axis.legend()
    if heads:
        axes[0][1].set_xlabel("epoch")
        axes[0][1].set_ylabel("validation accuracy (%)")
        axes[0][1].set_title("Per-head validation accuracy")
        axes[0][1].grid(True, alpha=0.3)
        axes[0][1].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"plot_loss_curves: wrote {args.out}")


if __name__ == "__main__":
    main()
