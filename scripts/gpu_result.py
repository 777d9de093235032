#!/usr/bin/env python3
"""Reads what scripts/gpu_check.sh writes; Python's standard library only, so that it runs here and
under the GPU machine's python3 alike.

The result file (gpu_check_result.txt) holds one record a line, `key=value` fields separated by
spaces; a value holds no space, except `note=`, which is always last and takes the rest of the
line. The first field names the record:
  run=gpu_check version=1 started=ISO-TIME host=... bundle=...     once, first
  step=NAME status=pass|fail|skipped|no_device seconds=S [figures...] [note=free text]
  summary=gpu_check status=pass|fail|no_device exit=N passed=P failed=F skipped=K seconds=S
                                                                   once, last
A throughput step (step=bench_MODEL_PRECISION_IMPL) carries the bench's figures: model, precision,
impl (ptrain or pytorch), batch, images_per_sec, median_ms, and its memory (peak_in_use_mib for
ptrain, peak_allocated_mib and peak_reserved_mib for PyTorch; device_used_mib for both).

  gpu_result.py check FILE [--expect-status S]   validate; print one line per step; exit 1 if malformed
                                                 (or the summary's status is not S)
  gpu_result.py table FILE                       Markdown tables: the steps, and images/s of ptrain
                                                 against PyTorch with GPU memory, for docs/gpu_run.md
  gpu_result.py get FILE STEP KEY                one field of one step (exit 1 if absent)
  gpu_result.py loss-scales PATH                 the step/loss_scale scalars of a TensorBoard event
                                                 file (or of the newest one in a directory):
                                                 `values=N first= min= max= last= grown=0|1 shrunk=0|1`
"""
import os
import struct
import sys

STATUSES = ("pass", "fail", "skipped", "no_device")
SUMMARY_STATUSES = ("pass", "fail", "no_device")


class Malformed(Exception):
    pass


def parse_line(line):
    """One record: its fields in order, as a dict (Python keeps insertion order)."""
    fields = {}
    rest = line.strip()
    while rest:
        if rest.startswith("note="):
            fields["note"] = rest[len("note="):]
            break
        token, _, rest = rest.partition(" ")
        rest = rest.lstrip()
        key, eq, value = token.partition("=")
        if not eq or not key:
            raise Malformed(f"field '{token}' is not key=value")
        if key in fields:
            raise Malformed(f"key '{key}' twice")
        fields[key] = value
    return fields


def parse(path):
    """The records of a result file, each a dict with its line number under '_line'."""
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            try:
                record = parse_line(line)
            except Malformed as e:
                raise Malformed(f"{path}:{number}: {e}") from None
            record["_line"] = number
            records.append(record)
    return records


def validate(path, records):
    """The records' errors, as sentences naming the line; empty when the file is well formed."""
    errors = []
    if not records:
        return [f"{path}: no records"]
    if "run" not in records[0]:
        errors.append(f"{path}:{records[0]['_line']}: the first record must be run=gpu_check ...")
    if "summary" not in records[-1]:
        errors.append(f"{path}: the last record must be summary=gpu_check ... (the run did not finish?)")
    names = set()
    for r in records:
        where = f"{path}:{r['_line']}"
        if "step" in r:
            if r["step"] in names:
                errors.append(f"{where}: step '{r['step']}' twice")
            names.add(r["step"])
            if r.get("status") not in STATUSES:
                errors.append(f"{where}: step '{r['step']}' has status '{r.get('status')}', expected one of "
                              + ", ".join(STATUSES))
            try:
                float(r.get("seconds", ""))
            except ValueError:
                errors.append(f"{where}: step '{r['step']}' has seconds '{r.get('seconds')}', expected a number")
            for key in ("images_per_sec", "median_ms", "peak_in_use_mib", "peak_allocated_mib", "device_used_mib"):
                if key in r:
                    try:
                        float(r[key])
                    except ValueError:
                        errors.append(f"{where}: {key}='{r[key]}' is not a number")
        elif "summary" in r:
            if r is not records[-1]:
                errors.append(f"{where}: a summary before the end")
            if r.get("status") not in SUMMARY_STATUSES:
                errors.append(f"{where}: summary status '{r.get('status')}', expected one of "
                              + ", ".join(SUMMARY_STATUSES))
            steps = [s for s in records if "step" in s]
            for status, key in (("pass", "passed"), ("fail", "failed"), ("skipped", "skipped")):
                count = sum(1 for s in steps if s.get("status") == status)
                if r.get(key) != str(count):
                    errors.append(f"{where}: summary {key}={r.get(key)} but {count} step(s) have status {status}")
        elif "run" not in r:
            errors.append(f"{where}: a record that is none of run=, step=, summary=")
    return errors


def steps(records):
    return [r for r in records if "step" in r]


def summary(records):
    return records[-1] if records and "summary" in records[-1] else {}


def cmd_check(path, expect_status=None):
    try:
        records = parse(path)
    except (OSError, Malformed) as e:
        print(f"gpu_result.py: {e}", file=sys.stderr)
        return 1
    errors = validate(path, records)
    for e in errors:
        print(f"gpu_result.py: {e}", file=sys.stderr)
    for s in steps(records):
        note = f" ({s['note']})" if s.get("note") else ""
        print(f"{s['step']}: {s.get('status')} in {s.get('seconds')} s{note}")
    total = summary(records)
    if total:
        print(f"summary: {total.get('status')}, {total.get('passed')} passed, {total.get('failed')} failed, "
              f"{total.get('skipped')} skipped in {total.get('seconds')} s")
    if expect_status and total.get("status") != expect_status:
        print(f"gpu_result.py: {path}: summary status '{total.get('status')}', expected '{expect_status}'",
              file=sys.stderr)
        return 1
    return 1 if errors else 0


def cmd_table(path):
    records = parse(path)
    errors = validate(path, records)
    if errors:
        for e in errors:
            print(f"gpu_result.py: {e}", file=sys.stderr)
        return 1
    run = records[0]
    gpu = next((s.get("gpu") for s in steps(records) if s.get("gpu")), "unknown GPU")
    driver = next((s.get("driver") for s in steps(records) if s.get("driver")), "unknown")
    print(f"gpu_check {run.get('started', '')} on {gpu.replace('_', ' ')}, driver {driver}:\n")
    print("| step | status | seconds | note |")
    print("|---|---|---|---|")
    for s in steps(records):
        print(f"| {s['step']} | {s['status']} | {s['seconds']} | {s.get('note', '')} |")
    bench = {}
    for s in steps(records):
        if "images_per_sec" in s and "model" in s:
            bench.setdefault((s["model"], s.get("precision", "")), {})[s.get("impl", "")] = s
    if bench:
        print("\n| model | precision | batch | ptrain images/s | PyTorch images/s | ptrain / PyTorch "
              "| ptrain peak MiB | PyTorch peak MiB |")
        print("|---|---|---|---|---|---|---|---|")
        for (model, precision), by_impl in bench.items():
            ours, torch = by_impl.get("ptrain", {}), by_impl.get("pytorch", {})
            ratio = ""
            if ours and torch:
                ratio = f"{float(ours['images_per_sec']) / float(torch['images_per_sec']):.2f}"
            batch = ours.get("batch") or torch.get("batch", "")
            print(f"| {model} | {precision} | {batch} | {ours.get('images_per_sec', '')} | "
                  f"{torch.get('images_per_sec', '')} | {ratio} | {ours.get('peak_in_use_mib', '')} | "
                  f"{torch.get('peak_allocated_mib', '')} |")
    return 0


def cmd_get(path, step, key):
    for s in steps(parse(path)):
        if s["step"] == step and key in s:
            print(s[key])
            return 0
    return 1


# TensorBoard event files: TFRecord framing (u64 length, u32 crc, data, u32 crc) around Event
# protos; Event.summary (field 5) holds Summary.value (field 1) entries of tag (1) and
# simple_value (2, float). Only what ptrain's io/tensorboard.hpp writes is read.
def _varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _fields(data):
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise Malformed(f"protobuf wire type {wire}")
        yield number, value


def scalars(path, wanted_tag):
    """(step, value) of every scalar tagged wanted_tag in the event file at path."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        event = data[pos + 12:pos + 12 + length]
        pos += 12 + length + 4
        step = 0
        for number, value in _fields(event):
            if number == 2:
                step = value
            elif number == 5:
                for n, entry in _fields(value):
                    if n != 1:
                        continue
                    tag, simple = None, None
                    for k, v in _fields(entry):
                        if k == 1:
                            tag = v.decode("utf-8", "replace")
                        elif k == 2:
                            (simple,) = struct.unpack("<f", v)
                    if tag == wanted_tag and simple is not None:
                        out.append((step, simple))
    return out


def event_file(path):
    if os.path.isfile(path):
        return path
    files = [os.path.join(path, n) for n in os.listdir(path) if "tfevents" in n]
    if not files:
        raise Malformed(f"{path}: no TensorBoard event file (*tfevents*)")
    return max(files, key=lambda f: (os.path.getmtime(f), f))


def cmd_loss_scales(path):
    try:
        values = [v for _, v in sorted(scalars(event_file(path), "step/loss_scale"))]
    except (OSError, Malformed) as e:
        print(f"gpu_result.py: {e}", file=sys.stderr)
        return 1
    if not values:
        print(f"gpu_result.py: {path}: no step/loss_scale scalars", file=sys.stderr)
        return 1
    grown = any(b > a for a, b in zip(values, values[1:]))
    shrunk = any(b < a for a, b in zip(values, values[1:]))
    print(f"values={len(values)} first={values[0]:g} min={min(values):g} max={max(values):g} last={values[-1]:g} "
          f"grown={int(grown)} shrunk={int(shrunk)}")
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "check":
        expect = None
        if len(argv) == 5 and argv[3] == "--expect-status":
            expect = argv[4]
        elif len(argv) != 3:
            print(__doc__, file=sys.stderr)
            return 64
        return cmd_check(argv[2], expect)
    if len(argv) == 3 and argv[1] == "table":
        return cmd_table(argv[2])
    if len(argv) == 5 and argv[1] == "get":
        return cmd_get(argv[2], argv[3], argv[4])
    if len(argv) == 3 and argv[1] == "loss-scales":
        return cmd_loss_scales(argv[2])
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
