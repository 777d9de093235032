#!/usr/bin/env python3
"""Checks that the names README.md and docs/*.md write in backticks exist, so the docs cannot go
stale. Run by ctest as docs/check (test/CMakeLists.txt); Python 3's standard library only.

    check_docs.py --root REPO --build-dir BUILD --examples-dir BUILD/examples [FILE.md ...]

Without files it reads README.md and docs/*.md under REPO. Each problem is one line
`FILE:LINE: NAME: what is wrong`; the exit status is 1 when there is one.

What is read: inline code spans (`...`), split into words at white space; each line of a fenced
sh/bash/console block (a line ending in \\ continues on the next); `#include <ptrain/...>` lines of
fenced cpp blocks; and Markdown links to files ([text](path), [text](file.md#heading): the file,
and the heading's anchor as GitHub makes it, must exist). Other fenced blocks (cmake, text) are
not read. `<...>` in a word is a placeholder, as are `*` and `{a,b}`; in a path, so is a run
of capitals (`NAME`, `DIR`) when the literal name does not exist: the pattern must match something.

The rules, in order (a word that fits none is not a name: identifiers, values, data files):
 1. Build outputs: `build/<folder>/<program>` must be a target of <folder>/CMakeLists.txt (the
    program appears there as a word; an example's CUDA build `NAME_cuda` counts as `NAME`).
 2. Repository paths: a word whose first part is a top-level entry of the repository (include/,
    test/, scripts/, LICENSE, ...) must exist. If it does not, has no file extension and its first
    part is a ctest area (rule 4: `examples/fashion_mnist/np1`), it is checked as a ctest entry.
 3. Headers and sources by a shorter name: a word ending in .hpp .cuh .cu .cpp .py .sh .cmake
    .sbatch, or a folder of an area of include/ptrain/ (`kernels/cpu/`), is looked up under
    include/, under include/ptrain/ (`train/checkpoint.hpp`), then as the end of any path in the
    repository (`detail/json.hpp`, `winograd.hpp`).
 4. ctest entries: `AREA/NAME` without an extension or a trailing `/`, where AREA is the first
    part of an entry of `ctest --test-dir BUILD -N` (`nn/albert_test`, `mpi/url_launch/*`), and
    `fuzz_replay_...`, must be entries of that build. CUDA entries (`cuda/...`, `examples/NAME_cuda/...`) are checked only
    when the build has CUDA entries (CI's, configured with nvcc, has), and entries of an area the
    build has none in (slurm/ without MPI) are skipped; both are said on stdout.
 5. Example flags (`-x`, `--xyz`, up to a `=`) must be in the `--help` of their example:
    - in a command line (a code span of several words whose first is not a flag, or a line of a
      fenced shell block) the flags after the example's program (`build/examples/NAME` or
      `build/examples/NAME_cuda` anywhere, a bare `NAME` as the first word), up to `|`, `;`, `&&`
      or `#`; flags before it are the launcher's (mpiexec, srun) and flags of other programs
      (cmake, ctest) are not checked. A command with
      `...` in place of the program takes the context below for the flags after `...`;
    - a code span that starts with a flag (`--resume`, `--stages 2`, `--emsize --nhid`): each of its
      `--` words belongs to the examples the same table row names in backticks, else to those the
      nearest heading above names (`## ResNet on CIFAR-10: \\`resnet_cifar10\\``); a row or heading
      naming another program in backticks (`tools/sweep.py`, `build/tools/ptrain_run`) leaves its flags unchecked; with no
      context some example must take the flag.
    An example's flags are its program's `--help` (the program BUILD/examples/NAME, or one given
    with --example NAME=PROGRAM); the flags of an example not built are not checked (said once).
Write a word that looks like a name but is none (a TensorBoard tag such as train/loss) without
backticks, or in a ```text block.
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys

SOURCE_EXTENSIONS = (".hpp", ".cuh", ".cu", ".cpp", ".py", ".sh", ".cmake", ".sbatch")
SHELL_FENCES = {"sh", "bash", "console", "shell"}
CPP_FENCES = {"cpp", "c++", "cu", "cuda"}
UNSLASHED_CTEST_PREFIXES = ("fuzz_replay_",)  # ctest families named without an area
FLAG = re.compile(r"^--?[A-Za-z][\w:.-]*")
CAPITALS = re.compile(r"(?<![A-Za-z])[A-Z]+(?![A-Za-z])")


def has_placeholder(word):
    return any(c in word for c in "<*{…")


def to_globs(word, capitals=False):
    """The fnmatch patterns a word with placeholders stands for."""
    patterns = [re.sub(r"<[^>]*>", "*", word).replace("…", "*")]
    if capitals:
        patterns = [CAPITALS.sub("*", p) for p in patterns]
    out = []
    for p in patterns:  # {a,b} as shell brace expansion, one level
        m = re.search(r"\{([^{}]*)\}", p)
        out += [p[:m.start()] + alt + p[m.end():] for alt in m.group(1).split(",")] if m else [p]
    return out


class Repo:
    def __init__(self, root):
        self.root = root
        self.top = {e for e in os.listdir(root) if not e.startswith("build") and e != ".git"}
        self.paths = set()  # every file and folder, relative, folders with a trailing /
        for folder, dirs, files in os.walk(root):
            rel = os.path.relpath(folder, root)
            if rel != ".":
                if rel.split(os.sep)[0].startswith("build") or rel.split(os.sep)[0] == ".git":
                    dirs[:] = []
                    continue
                self.paths.add(rel.replace(os.sep, "/") + "/")
            for f in files:
                self.paths.add(os.path.normpath(os.path.join(rel, f)).replace(os.sep, "/"))

    def exists(self, rel, capitals=True):
        """rel (a file, or a folder with or without its /) exists, placeholders matching."""
        rel = rel.rstrip("/")
        if rel and (rel in self.paths or rel + "/" in self.paths):
            return True
        if not (has_placeholder(rel) or (capitals and CAPITALS.search(rel))):
            return False
        for pattern in to_globs(rel, capitals):
            if any(fnmatch.fnmatchcase(p.rstrip("/"), pattern) for p in self.paths):
                return True
        return False

    def ends_with(self, tail):
        tail = tail.rstrip("/")
        for pattern in to_globs(tail, capitals=True) if has_placeholder(tail) else [tail]:
            for p in self.paths:
                p = p.rstrip("/")
                if p == pattern or fnmatch.fnmatchcase(p, pattern) or fnmatch.fnmatchcase(p, "*/" + pattern):
                    return True
        return False

    def read(self, rel):
        try:
            with open(os.path.join(self.root, rel), encoding="utf-8") as f:
                return f.read()
        except OSError:
            return ""


class Checker:
    def __init__(self, repo, ctest_names, helps, example_names):
        self.repo = repo
        self.ctest = ctest_names  # None: no build given, ctest entries not checked
        self.areas = {n.split("/")[0] for n in ctest_names or [] if "/" in n}
        self.has_cuda = any(n.startswith("cuda/") or "_cuda/" in n for n in ctest_names or [])
        self.helps = helps  # example -> set of flags
        self.examples = example_names
        self.include_areas = {e for e in os.listdir(os.path.join(repo.root, "include", "ptrain"))
                              if os.path.isdir(os.path.join(repo.root, "include", "ptrain", e))}
        self.problems = []
        self.notes = set()

    def problem(self, where, name, what):
        self.problems.append(f"{where[0]}:{where[1]}: {name}: {what}")

    # ---- what a word is -------------------------------------------------------------------
    def example_of(self, word):
        """The example a word names as a program or in prose, or None."""
        base = word[len("build/examples/"):] if word.startswith("build/examples/") else word
        base = base[2:] if base.startswith("./") else base
        if base.endswith("_cuda") and base[:-5] in self.examples:
            base = base[:-5]
        return base if base in self.examples else None

    def check_word(self, word, where):
        word = word.strip("\"'(),;:.") if not word.endswith("/") else word.lstrip("\"'(")
        if not word or word.startswith(("-", "/", "~", "$", "http")) or "://" in word or "=" in word:
            return
        first = word.split("/")[0]
        if first == "build" and "/" in word:
            self.check_build_output(word, where)
        elif "/" in word and first in self.repo.top or word in self.repo.top:
            if self.repo.exists(word):
                return
            if not os.path.splitext(word)[1] and first in self.areas:
                self.check_ctest(word, where)
            else:
                self.problem(where, word, "no such file or folder in the repository")
        elif word.endswith(SOURCE_EXTENSIONS) or (word.endswith("/") and first in self.include_areas):
            if not (self.repo.exists("include/" + word) or self.repo.exists("include/ptrain/" + word)
                    or self.repo.ends_with(word)):
                self.problem(where, word, "no such file or folder in the repository (nor under include/ptrain/)")
        elif "/" in word and first in self.areas and not os.path.splitext(word)[1] and not word.endswith("/"):
            self.check_ctest(word, where)
        elif word.startswith(UNSLASHED_CTEST_PREFIXES):
            self.check_ctest(word, where)

    def check_build_output(self, word, where):
        parts = word.rstrip("/").split("/")
        if len(parts) < 3:
            return
        folder, program = "/".join(parts[1:-1]), parts[-1]
        cmake = self.repo.read(f"{folder}/CMakeLists.txt")
        names = {program, program[:-5] if program.endswith("_cuda") else program}
        if has_placeholder(program) or CAPITALS.fullmatch(program.split("_")[0] or "-"):
            pattern = to_globs(program, capitals=True)[0]
            if cmake and re.search(fnmatch.translate(pattern).replace(r"\Z", "").replace("(?s:", "(?:"), cmake):
                return
        if not any(re.search(rf"(?<![\w$]){re.escape(n)}(?!\w)", cmake) for n in names):
            self.problem(where, word, f"no such program: not a target of {folder}/CMakeLists.txt")

    def check_ctest(self, name, where):
        if self.ctest is None:
            return
        if "/" in name and name.split("/")[0] not in self.areas | {"cuda"}:
            return
        if (name.startswith("cuda/") or "_cuda/" in name) and not self.has_cuda:
            self.notes.add("CUDA ctest entries not checked: this build has none (configure with a CUDA toolkit)")
            return
        if name.split("/")[0] not in self.areas and "/" in name:
            self.notes.add(f"ctest entries of {name.split('/')[0]}/ not checked: this build has none")
            return
        patterns = to_globs(name) if has_placeholder(name) else [name]
        if not any(fnmatch.fnmatchcase(n, p) for p in patterns for n in self.ctest) and not (
                CAPITALS.search(name) and any(fnmatch.fnmatchcase(n, p) for p in to_globs(name, capitals=True)
                                              for n in self.ctest)):
            self.problem(where, name, "no such ctest entry (ctest -N)")

    def check_flag(self, flag, examples, where):
        flag = FLAG.match(flag)
        if not flag:
            return
        flag = flag.group(0).rstrip(".:")
        if flag == "--help":
            return
        if examples is None:  # another program's flag
            return
        candidates = examples or self.examples
        known = [e for e in candidates if e in self.helps]
        for e in candidates:
            if e not in self.helps:
                self.notes.add(f"flags of {e} not checked: its program was not given (--example {e}=PROGRAM)")
        if known and not any(flag in self.helps[e] for e in known):
            whose = " or ".join(sorted(known)) if examples else "any example"
            self.problem(where, flag, f"not in the --help of {whose}")

    # ---- commands and spans ---------------------------------------------------------------
    def check_command(self, words, context, where):
        program = None  # the example whose flags follow; None: flags not checked
        elided = False
        for index, word in enumerate(words):
            if word in ("|", ";", "&&", "||") or word.startswith("#"):
                program, elided = None, False
                if word.startswith("#"):
                    break
                continue
            if FLAG.match(word):
                if program:
                    for part in word.split("/") if word.count("/--") else [word]:
                        self.check_flag(part, [program], where)
                elif elided:
                    self.check_flag(word, context, where)
                continue
            if word == "..." and program is None:
                elided = True
            example = self.example_of(word)
            if example and (word.startswith(("build/", "./")) or index == 0):
                program, elided = example, False
            self.check_word(word, where)

    def check_span(self, text, context, where):
        text = re.sub(r"<[^>]*>", lambda m: m.group(0).replace(" ", "_"), text)
        words = text.split()
        if not words:
            return
        if FLAG.match(words[0]):
            for word in words:
                if word.startswith("--"):
                    parts = word.split("/") if word.count("/--") else [word]
                    for part in parts:
                        self.check_flag(part, context, where)
                else:
                    self.check_word(word, where)
        elif len(words) > 1:
            self.check_command(words, context, where)
        else:
            self.check_word(words[0], where)

    # ---- files ----------------------------------------------------------------------------
    def named_examples(self, text):
        """Examples (a list) or another program (None) a heading or table row names; [] if none."""
        found, other = [], False
        for span in re.findall(r"`([^`]+)`", text):
            for word in span.split():
                e = self.example_of(word.strip(",;:()"))
                if e:
                    found.append(e)
                elif "/" in word and not FLAG.match(word) and (
                        os.path.splitext(word)[1] in (".py", ".sh") or
                        (word.startswith("build/") and not word.startswith("build/examples/"))):
                    other = True
        if found:
            return found
        return None if other else []

    def check_file(self, rel):
        path = os.path.join(self.repo.root, rel)
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        headings = []  # (level, examples or None) of the headings above
        fence = None  # the open fence's language
        command, command_line = [], 0
        prose = []  # (line number, text) of the lines outside fences
        heading_at = {}  # line number -> context from headings
        for number, line in enumerate(lines, 1):
            stripped = line.strip()
            if stripped.startswith("```"):
                fence = None if fence is not None else (stripped[3:].strip().lower() or "text")
                continue
            if fence is not None:
                context = self.context(headings, "")
                if fence in SHELL_FENCES:
                    if not command:
                        command_line = number
                    body = stripped[:-1] if stripped.endswith("\\") else stripped
                    command += re.sub(r"<[^>]*>", lambda m: m.group(0).replace(" ", "_"), body).split()
                    if not stripped.endswith("\\"):
                        self.check_command(command, context, (rel, command_line))
                        command = []
                elif fence in CPP_FENCES:
                    m = re.match(r"\s*#\s*include\s*<(ptrain/[^>]+)>", line)
                    if m and not self.repo.exists("include/" + m.group(1), capitals=False):
                        self.problem((rel, number), m.group(1), "no such header under include/")
                continue
            m = re.match(r"(#+)\s", line)
            if m:
                level = len(m.group(1))
                headings = [h for h in headings if h[0] < level] + [(level, self.named_examples(line))]
            heading_at[number] = self.context(headings, line if stripped.startswith("|") else "")
            prose.append((number, line))
        # Code spans may run over a line break (not a blank line): scan paragraph by paragraph.
        paragraph = []
        for number, line in prose + [(len(lines) + 1, "")]:
            if line.strip() and not line.strip().startswith("|"):
                paragraph.append((number, line))
                continue
            if paragraph:
                self.check_prose(rel, paragraph, heading_at)
                paragraph = []
            if line.strip().startswith("|"):
                self.check_prose(rel, [(number, line)], heading_at)

    def anchors(self, rel):
        return heading_anchors(self.repo.read(rel))

    def context(self, headings, row):
        if row:
            named = self.named_examples(row)
            if named != []:
                return named
        for _, named in reversed(headings):
            if named != []:
                return named
        return []

    def check_prose(self, rel, paragraph, heading_at):
        text = "\n".join(line for _, line in paragraph)
        starts = []
        offset = 0
        for number, line in paragraph:
            starts.append((offset, number))
            offset += len(line) + 1

        def line_of(position):
            return max(n for o, n in starts if o <= position)

        for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", text):
            number = line_of(m.start())
            self.check_span(m.group(1).replace("\n", " "), heading_at[number], (rel, number))
        for m in re.finditer(r"\]\(([^)\s#]+)(#[^)]*)?\)", text):
            target = m.group(1)
            if "://" in target or target.startswith("mailto:"):
                continue
            resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target)).replace(os.sep, "/")
            if not self.repo.exists(resolved, capitals=False):
                self.problem((rel, line_of(m.start())), target, "the link's target does not exist")
            elif m.group(2) and resolved.endswith(".md") and m.group(2)[1:] not in self.anchors(resolved):
                self.problem((rel, line_of(m.start())), target + m.group(2), "no such heading in " + resolved)


def heading_anchors(text):
    """The anchors GitHub gives a Markdown file's headings."""
    anchors, seen, fence = set(), {}, False
    for line in text.split("\n"):
        if line.strip().startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"#+\s+(.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def example_flags(program):
    out = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--build-dir", help="a configured build: its ctest -N lists the entries")
    parser.add_argument("--ctest", default="ctest", help="the ctest program")
    parser.add_argument("--example", action="append", default=[], metavar="NAME=PROGRAM",
                        help="an example's program, whose --help lists its flags")
    parser.add_argument("--examples-dir", help="the folder of the built examples (BUILD/examples): "
                        "each example's program found there by its name")
    parser.add_argument("files", nargs="*", help="Markdown files relative to the root (default: README.md docs/*.md)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    repo = Repo(root)

    ctest_names = None
    if args.build_dir:
        out = subprocess.run([args.ctest, "--test-dir", args.build_dir, "-N"], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"check_docs: ctest -N in {args.build_dir} failed:\n{out.stdout}{out.stderr}")
        ctest_names = re.findall(r"^\s*Test\s+#\d+: (\S+)", out.stdout, re.M)

    helps = {}
    for item in args.example:
        name, _, program = item.partition("=")
        helps[name] = example_flags(program)
    examples = {os.path.splitext(f)[0] for f in os.listdir(os.path.join(root, "examples")) if f.endswith(".cpp")}
    for name in sorted(examples) if args.examples_dir else []:
        program = os.path.join(args.examples_dir, name)
        if name not in helps and os.access(program, os.X_OK):
            helps[name] = example_flags(program)

    files = args.files or ["README.md"] + sorted(
        "docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    checker = Checker(repo, ctest_names, helps, examples)
    for path in files:
        absolute = os.path.abspath(path if os.path.isabs(path) else os.path.join(root, path))
        checker.check_file(os.path.relpath(absolute, root))
    for note in sorted(checker.notes):
        print(f"check_docs: {note}")
    for p in checker.problems:
        print(p)
    if checker.problems:
        print(f"check_docs: {len(checker.problems)} name(s) in the docs do not exist")
        return 1
    print(f"check_docs: {len(files)} files, every checked name exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
