#!/usr/bin/env python3
"""Where a build's compile time went, from Ninja's log (BUILD_DIR/.ninja_log): the seconds of each
build step summed by part (tests, CUDA, header checks, examples, bench, the prebuilt library, ...).
A step's seconds are its wall time, about its CPU time where the build ran one step per core, as
scripts/test.sh's do; a compile the cache served counts its few hundredths. The last run of each
output counts once. scripts/test.sh prints one line per build folder in its summary.

Usage: scripts/compile_seconds.py BUILD_DIR [BUILD_DIR ...]
Prints, per folder: `NAME: S s of compiles and links (PART S, PART S, ...)`, parts by seconds;
a folder without a Ninja log (another generator, or not built) is left out.
"""
import collections
import pathlib
import sys


def part_of(output):
    if output.endswith(".cu.o"):
        return "CUDA"
    if "/header_checks.dir/" in output:
        return "header checks"
    if output.startswith("CMakeFiles/ptrain_prebuilt.dir/"):
        return "library"
    if not output.endswith(".o"):
        return "links"
    top = output.split("/", 1)[0]
    return {"test": "tests", "CMakeFiles": "other"}.get(top, top)


def step_seconds(log):
    last = {}  # output -> (start ms, end ms) of its last run
    for line in log.read_text().splitlines():
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < 4:
            raise SystemExit(f"compile_seconds.py: {log}: not a Ninja log line: {line!r}")
        last[fields[3]] = (int(fields[0]), int(fields[1]))
    parts = collections.Counter()
    for output, (start, end) in last.items():
        parts[part_of(output)] += (end - start) / 1000
    return parts


def main(argv):
    if not argv:
        raise SystemExit(__doc__.split("\n\n")[1])
    for folder in map(pathlib.Path, argv):
        log = folder / ".ninja_log"
        if not log.is_file():
            continue
        parts = step_seconds(log)
        listed = ", ".join(f"{name} {seconds:,.0f}" for name, seconds in parts.most_common())
        print(f"{folder.name}: {sum(parts.values()):,.0f} s of compiles and links ({listed})")


if __name__ == "__main__":
    main(sys.argv[1:])
