#!/usr/bin/env python3
"""ctest gpu/result_file_parses: scripts/gpu_result.py, the reader docs/gpu_run.md uses, on the
committed sample of gpu_check.sh's result file (test/gpu/sample_result.txt), on broken copies of it,
and on a TensorBoard event file framed as ptrain's io/tensorboard.hpp writes it.
Usage: result_file_test.py SCRIPTS/gpu_result.py SAMPLE WORK_DIR"""
import importlib.util
import os
import struct
import subprocess
import sys

script, sample, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
spec = importlib.util.spec_from_file_location("gpu_result", script)
gpu_result = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_result)
failures = []


def expect(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(*args):
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


# The sample: well formed, its figures where the docs' table reads them.
records = gpu_result.parse(sample)
expect(gpu_result.validate(sample, records) == [], "the sample validates")
steps = {s["step"]: s for s in gpu_result.steps(records)}
expect(records[0].get("run") == "gpu_check" and records[-1].get("summary") == "gpu_check",
       "the sample opens with run= and closes with summary=")
expect(steps["bench_resnet50_fp16_ptrain"]["images_per_sec"] == "800.0", "a figure of a bench step")
expect(steps["transformer_lm_np1"]["note"].startswith("exit 1: the final validation perplexity 4.31"),
       "note= takes the rest of the line, spaces and '=' included")
expect(steps["imagenet_amp_loss_scale"]["loss_scale_grown"] == "1", "the loss scale's figures")
rc, out, err = run("check", sample)
expect(rc == 0 and "summary: fail, 18 passed, 2 failed, 6 skipped" in out, "check prints the summary: " + out[-80:])
rc, out, err = run("check", sample, "--expect-status", "no_device")
expect(rc == 1 and "expected 'no_device'" in err, "check --expect-status refuses another status")
rc, out, err = run("table", sample)
expect(rc == 0 and "| resnet50 | fp16 | 128 | 800.0 | 2560.0 | 0.31 | 30000 | 20000 |" in out,
       "table gives ptrain against PyTorch with memory")
rc, out, err = run("get", sample, "nvidia_smi", "gpu")
expect(rc == 0 and out.strip() == "NVIDIA_H200", "get reads one field")
rc, out, err = run("get", sample, "nvidia_smi", "no_such_key")
expect(rc == 1, "get of an absent field exits 1")

# Broken copies: each error named with its line.
lines = open(sample, encoding="utf-8").read().splitlines()


def broken(name, edit):
    path = os.path.join(work, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(edit(list(lines))) + "\n")
    return run("check", path)


rc, out, err = broken("no_summary.txt", lambda l: l[:-1])
expect(rc == 1 and "the last record must be summary=" in err, "a file without its summary (a run cut short)")
rc, out, err = broken("bad_status.txt",
                      lambda l: [x.replace("step=header_checks status=pass", "step=header_checks status=ok") for x in l])
expect(rc == 1 and "status 'ok'" in err and "bad_status.txt:" in err, "an unknown status, with its line: " + err[:120])
rc, out, err = broken("bad_field.txt", lambda l: [x.replace(" seconds=0.3", " seconds") for x in l])
expect(rc == 1 and "is not key=value" in err, "a field without '='")
rc, out, err = broken("bad_number.txt", lambda l: [x.replace("images_per_sec=800.0", "images_per_sec=fast") for x in l])
expect(rc == 1 and "images_per_sec='fast' is not a number" in err, "a figure that is no number")
rc, out, err = broken("twice.txt", lambda l: l[:5] + [l[5]] + l[5:])
expect(rc == 1 and "twice" in err, "a step twice")


# Loss scales from an event file framed as io/tensorboard.hpp frames it (the CRCs are not read).
def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field(number, wire, payload):
    key = varint(number << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def scalar_event(tag, value, step):
    value_msg = field(1, 2, tag.encode()) + field(2, 5, struct.pack("<f", value))
    summary = field(1, 2, value_msg)
    return field(1, 1, struct.pack("<d", 1.7e9)) + field(2, 0, varint(step)) + field(5, 2, summary)


def record(data):
    return struct.pack("<Q", len(data)) + b"\0\0\0\0" + data + b"\0\0\0\0"


events = os.path.join(work, "tensorboard")
os.makedirs(events, exist_ok=True)
scales = [16777216.0, 8388608.0, 4194304.0, 65536.0, 32768.0, 32768.0, 65536.0]
with open(os.path.join(events, "events.out.tfevents.1.host"), "wb") as f:
    f.write(record(field(1, 1, struct.pack("<d", 1.7e9)) + field(3, 2, b"brain.Event:2")))
    for step, scale in enumerate(scales):
        f.write(record(scalar_event("step/loss", 2.3, step)))
        f.write(record(scalar_event("step/loss_scale", scale, step)))
rc, out, err = run("loss-scales", events)
expect(rc == 0 and out.strip() == "values=7 first=1.67772e+07 min=32768 max=1.67772e+07 last=65536 grown=1 shrunk=1",
       "loss-scales reads the scalars and sees both moves: " + out.strip())
with open(os.path.join(events, "events.out.tfevents.2.host"), "wb") as f:
    for step in range(3):
        f.write(record(scalar_event("step/loss_scale", 65536.0, step)))
rc, out, err = run("loss-scales", events)
expect(rc == 0 and "grown=0 shrunk=0" in out, "the newest event file, a scale that never moved")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all gpu_result.py checks passed")
