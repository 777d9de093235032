#!/usr/bin/env python3
"""docs/check_fails_on_missing_name: scripts/check_docs.py run on test/docs/missing_names.md, which
names a path, a header, a ctest entry and an example flag that do not exist (and four that do),
must fail and name each missing one as FILE:LINE: NAME, and nothing else.

    check_docs_test.py ROOT BUILD CTEST"""
import subprocess
import sys

root, build, ctest = sys.argv[1:4]
fixture = "test/docs/missing_names.md"
run = subprocess.run([sys.executable, f"{root}/scripts/check_docs.py", "--root", root, "--build-dir", build,
                      "--ctest", ctest, "--examples-dir", f"{build}/examples", fixture],
                     capture_output=True, text=True)
output = run.stdout + run.stderr
print(output, end="")
expected = [f"{fixture}:5: scripts/no_such_script.sh: ", f"{fixture}:6: ptrain/train/no_such_header.hpp: ",
            f"{fixture}:7: train/no_such_test: ", f"{fixture}:8: --no-such-flag: not in the --help of fashion_mnist"]
reported = [line for line in output.splitlines() if line.startswith(fixture + ":")]
failures = []
if run.returncode == 0:
    failures.append("the checker passed a file that names four things that do not exist")
failures += [f"not reported: {e}" for e in expected if not any(line.startswith(e) for line in reported)]
failures += [f"reported, but exists: {line}" for line in reported if not any(line.startswith(e) for e in expected)]
for failure in failures:
    print(f"check_docs_test: {failure}")
print("check_docs_test: " + ("FAILED" if failures else "passed: each missing name reported with its file and line"))
sys.exit(1 if failures else 0)
