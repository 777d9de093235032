"""Reads what an example wrote with --tensorboard DIR and --timeline FILE through other readers
than ptrain's: TensorBoard's own EventAccumulator (tensorboard from PyPI) and Python's json.
Fails, never skips, when tensorboard cannot be imported: scripts/test.sh installs it.

usage: read_training_outputs.py RUN_DIR TIMELINE RANKS EPOCHS
"""
import glob
import json
import math
import os
import sys


def fail(message):
    print("read_training_outputs: FAILED: " + message, file=sys.stderr)
    sys.exit(1)


def main():
    run_dir, timeline, ranks, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as e:
        fail(f"cannot import TensorBoard's reader ({e}) with {sys.executable}; "
             "scripts/test.sh installs it (pip install tensorboard into ~/.cache/ptrain/tensorboard-venv)")

    files = glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))
    if not files:
        fail(f"no event file in {run_dir}")
    newest = max(files, key=os.path.getmtime)  # earlier runs of the test leave theirs
    accumulator = EventAccumulator(newest, size_guidance={"scalars": 0})
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    expected = {"train/loss", "train/accuracy", "val/loss", "val/accuracy", "epoch/lr", "epoch/loss_scale",
                "epoch/images_per_second", "step/loss", "step/lr", "step/loss_scale", "step/images_per_second"}
    if not expected <= tags:
        fail(f"{newest}: scalars {sorted(expected - tags)} missing (has {sorted(tags)})")
    for tag in expected:
        values = accumulator.Scalars(tag)
        if any(not math.isfinite(v.value) for v in values):
            fail(f"{newest}: {tag} holds a non-finite value")
        if tag.startswith("step/"):
            steps = [v.step for v in values]
            if steps != list(range(1, len(steps) + 1)) or len(steps) < 2:
                fail(f"{newest}: {tag} at steps {steps[:5]}..., expected 1, 2, ...")
        elif [v.step for v in values] != list(range(1, epochs + 1)):
            fail(f"{newest}: {tag} at steps {[v.step for v in values]}, expected the epochs 1..{epochs}")
    accuracy = accumulator.Scalars("val/accuracy")[-1].value
    if not 0 <= accuracy <= 1:
        fail(f"{newest}: val/accuracy {accuracy} is not in [0, 1]")

    with open(timeline) as f:
        trace = json.load(f)
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    for rank in range(ranks):
        names = {e["name"] for e in spans if e["pid"] == rank}
        for name in ("data", "forward", "backward", "optimizer"):
            if name not in names:
                fail(f"{timeline}: rank {rank} has no {name} span")
        if ranks > 1 and not any(n.startswith("bucket ") for n in names):
            fail(f"{timeline}: rank {rank} has no gradient bucket span")
    if {e["pid"] for e in spans} != set(range(ranks)):
        fail(f"{timeline}: spans of ranks {sorted({e['pid'] for e in spans})}, expected 0..{ranks - 1}")
    print(f"read_training_outputs: {newest}: {len(tags)} scalar tags; {timeline}: {len(spans)} spans over {ranks} ranks")


if __name__ == "__main__":
    main()
