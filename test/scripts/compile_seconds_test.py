#!/usr/bin/env python3
"""scripts/compile_seconds: scripts/compile_seconds.py on build folders made here: a Ninja log whose
steps fall in each part (an object compiled twice counts its last run), a folder without a log
(left out) and a log with a broken line (an error naming the file).

    compile_seconds_test.py SCRIPT"""
import pathlib
import subprocess
import sys
import tempfile

script = sys.argv[1]
steps = [  # start ms, end ms, output
    (0, 9000, "test/CMakeFiles/test_nn.dir/unity/test_nn_0.cpp.o"),
    (0, 4000, "test/CMakeFiles/header_checks.dir/header_check_sources/ptrain__ptrain.cpp.o"),
    (100, 2100, "test/CMakeFiles/header_checks.dir/header_check_sources/ptrain__mpi.cpp.o"),
    (0, 70000, "examples/CMakeFiles/fashion_mnist_cuda.dir/fashion_mnist_cuda.cu.o"),
    (0, 30000, "CMakeFiles/ptrain_prebuilt.dir/src/prebuilt/kernels.cpp.o"),
    (0, 12000, "examples/CMakeFiles/resnet_cifar10.dir/resnet_cifar10.cpp.o"),
    (500, 1500, "examples/resnet_cifar10"),
    (0, 3000, "bench/CMakeFiles/bench_conv.dir/conv_bench.cpp.o"),
    (0, 1000, "CMakeFiles/ptrain_version.dir/version.cpp.o"),
    (20000, 20040, "test/CMakeFiles/test_nn.dir/unity/test_nn_0.cpp.o"),  # served by the cache
]
expected = ("main: 123 s of compiles and links (CUDA 70, library 30, examples 12, header checks 6, bench 3, "
            "links 1, other 1, tests 0)")
failures = []
with tempfile.TemporaryDirectory() as tmp:
    main, unbuilt, broken = (pathlib.Path(tmp, name) for name in ("main", "unbuilt", "broken"))
    for folder in (main, unbuilt, broken):
        folder.mkdir()
    (main / ".ninja_log").write_text("# ninja log v5\n" + "".join(
        f"{start}\t{end}\t0\t{output}\t0123456789abcdef\n" for start, end, output in steps))
    (broken / ".ninja_log").write_text("# ninja log v5\n0\t100\n")
    run = subprocess.run([sys.executable, script, str(main), str(unbuilt)], capture_output=True, text=True)
    print(run.stdout + run.stderr, end="")
    if run.returncode != 0 or run.stdout.splitlines() != [expected]:
        failures.append(f"expected exactly the line {expected!r}")
    run = subprocess.run([sys.executable, script, str(broken)], capture_output=True, text=True)
    print(run.stdout + run.stderr, end="")
    if run.returncode == 0 or f"{broken}/.ninja_log: not a Ninja log line" not in run.stderr:
        failures.append("a broken log line must fail, naming the file")
for failure in failures:
    print(f"compile_seconds_test: FAILED: {failure}")
print("compile_seconds_test: " + ("FAILED" if failures else "passed"))
sys.exit(1 if failures else 0)
