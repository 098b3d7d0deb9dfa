#!/usr/bin/env python3
"""One-line mutations of the upstream, the fleet store, the adapters and
`reached`, each with the test command that must fail on it (RELIABILITY.md,
"Mutations"). A step that can fail: it exits non-zero on a survivor, on a
pattern that is no longer in its file, on a mutant that does not build, on a
test command that fails before anything is mutated, and on a file of the
covered folders that no mutation touches.

The mutations are kept in .ci/mutations/*.toml, one table each:

    [[mutation]]
    id = "cancelled-tokens-kept"              # unique
    file = "nika-retry/src/upstream/pacer.rs"
    old = '''the exact text, found once in the file'''
    new = '''what it becomes'''
    test = "cargo test -p nika-retry-tests --test pacing -- cancelled"
    promise = "a cancelled waiter gives its tokens back"   # optional

Usage, from the repository's root:
    .ci/mutations.py --check            # the static checks only (fast)
    .ci/mutations.py                    # every mutation (the documented full run)
    .ci/mutations.py --sample N         # N mutations drawn from the commit's hash (CI)
    .ci/mutations.py ID ...             # the named ones
    .ci/mutations.py --markdown         # with the full run: RELIABILITY.md's table

Each selected test command first runs on the tree as it is and must pass
(a flake or a missing `redis-server` is then an error, never a kill); a
mutant is killed only when its command fails with a failed test or a hang
(`timeout`). Needs `redis-server` on PATH (Debian's package).
"""
import argparse
import glob
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tomllib

# Every .rs file under these folders has at least one mutation, but tests.rs
# and the files an `[exempt]` table of .ci/mutations/*.toml names with why
# (a file without behaviour: declarations and re-exports).
COVERED = [
    "nika-retry/src/upstream",
    "nika-retry/src/adapter",
    "nika-retry/src/tower",
    "nika-retry/src/reqwest_middleware",
]
EXEMPT = {"tests.rs"}
TIMEOUT_S = int(os.environ.get("MUTATION_TIMEOUT", "600"))


def load():
    out, exempt = [], {}
    for path in sorted(glob.glob(".ci/mutations/*.toml")):
        with open(path, "rb") as f:
            data = tomllib.load(f)
            exempt.update(data.get("exempt", {}))
            for m in data.get("mutation", []):
                missing = {"id", "file", "old", "new", "test"} - m.keys()
                if missing:
                    sys.exit(f"{path}: a mutation lacks {sorted(missing)}: {m.get('id')}")
                m["source"] = path
                out.append(m)
    return out, exempt


def static_problems(muts, exempt):
    problems = []
    seen = {}
    for m in muts:
        if m["id"] in seen:
            problems.append(f"{m['id']}: defined twice ({seen[m['id']]}, {m['source']})")
        seen[m["id"]] = m["source"]
        if m["old"] == m["new"]:
            problems.append(f"{m['id']}: old and new are the same")
        try:
            with open(m["file"]) as f:
                n = f.read().count(m["old"])
        except FileNotFoundError:
            problems.append(f"{m['id']}: PATTERN: {m['file']} does not exist")
            continue
        if n != 1:
            problems.append(f"{m['id']}: PATTERN: found {n} times in {m['file']} (the code moved: update the mutation)")
    touched = {m["file"] for m in muts}
    for folder in COVERED:
        for path in sorted(glob.glob(f"{folder}/**/*.rs", recursive=True)):
            if os.path.basename(path) in EXEMPT or path in exempt:
                continue
            if path not in touched:
                problems.append(f"UNCOVERED: no mutation touches {path}")
    return problems


def run(cmd, timeout=TIMEOUT_S):
    """(verdict, output): PASSED, FAILED (a test failed), HUNG, BUILD (no build), ERROR.
    The build goes first, unbounded, so that `timeout` bounds the tests alone."""
    build = subprocess.run(cmd.split(" -- ")[0] + " --no-run", shell=True, capture_output=True, text=True)
    if build.returncode != 0:
        return "BUILD", build.stdout + build.stderr
    r = subprocess.run(f"timeout {timeout} {cmd}", shell=True, capture_output=True, text=True)
    out = r.stdout + r.stderr
    if r.returncode == 0:
        return "PASSED", out
    if r.returncode == 124:
        return "HUNG", out
    if "error: could not compile" in out or "error[E" in out:
        return "BUILD", out
    if "test result: FAILED" in out or "error: test failed" in out or "panicked at" in out:
        return "FAILED", out
    return "ERROR", out


def tail(out, n=25):
    return "\n".join("    " + line for line in out.strip().splitlines()[-n:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ids", nargs="*")
    ap.add_argument("--check", action="store_true", help="static checks only")
    ap.add_argument("--sample", type=int, help="run N mutations drawn from HEAD's hash")
    ap.add_argument("--seed", help="the sample's seed (default: HEAD's commit)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

    muts, exempt = load()
    problems = static_problems(muts, exempt)
    for p in problems:
        print(p, flush=True)
    print(f"{len(muts)} mutations in .ci/mutations/; {len(problems)} static problem(s)", flush=True)
    if problems:
        return 1
    if args.check:
        return 0

    chosen = muts
    if args.ids:
        unknown = set(args.ids) - {m["id"] for m in muts}
        if unknown:
            print(f"unknown mutation id(s): {sorted(unknown)}")
            return 1
        chosen = [m for m in muts if m["id"] in args.ids]
    elif args.sample:
        seed = args.seed or subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip() or "0"
        rng = random.Random(hashlib.sha256(seed.encode()).digest())
        chosen = rng.sample(muts, min(args.sample, len(muts)))
        print(f"sample of {len(chosen)} (seed {seed[:12]}): {', '.join(m['id'] for m in chosen)}", flush=True)

    if shutil.which("redis-server") is None:
        print("error: redis-server is not on PATH (apt-get install redis-server); "
              "the fleet's mutations cannot be judged without it")
        return 1

    failed = False
    commands = {}
    for m in chosen:
        commands[m["test"]] = max(commands.get(m["test"], 0), m.get("timeout", TIMEOUT_S))
    for cmd, timeout in sorted(commands.items()):
        verdict, out = run(cmd, timeout)
        if verdict != "PASSED":
            print(f"BASELINE {verdict}: `{cmd}` fails on the tree as it is:\n{tail(out)}", flush=True)
            failed = True
    if failed:
        return 1

    rows = []
    # Grouped by command: a change of features (`--features redis`)
    # rebuilds the crates, a mutant within a group only the mutated one.
    for m in sorted(chosen, key=lambda m: m["test"]):
        with open(m["file"]) as f:
            src = f.read()
        with open(m["file"], "w") as f:
            f.write(src.replace(m["old"], m["new"]))
        try:
            verdict, out = run(m["test"], m.get("timeout", TIMEOUT_S))
        finally:
            with open(m["file"], "w") as f:
                f.write(src)
        label = {"FAILED": "KILLED", "HUNG": "KILLED (hang)", "PASSED": "SURVIVED",
                 "BUILD": "BUILD-ERROR", "ERROR": "ERROR"}[verdict]
        print(f"{m['id']}: {label} :: {m['test']}", flush=True)
        if not label.startswith("KILLED"):
            failed = True
            print(tail(out), flush=True)
        rows.append((m, label))

    if args.markdown:
        print("\n| id | file | promise | killed by | verdict |\n|---|---|---|---|---|")
        for m, label in rows:
            print(f"| `{m['id']}` | `{m['file'].removeprefix('nika-retry/src/')}` | "
                  f"{m.get('promise', '')} | `{m['test']}` | {label} |")
    survived = sum(1 for _, label in rows if not label.startswith("KILLED"))
    print(f"{len(rows) - survived} of {len(rows)} killed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
