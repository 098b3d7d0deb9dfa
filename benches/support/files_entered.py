#!/usr/bin/env python3
"""The counter of benches/files_entered.sh: from two callgrind outputs of the
probe (more attempts, fewer), the runtime's files that the extra attempts
entered, and how many times each, per call.

    files_entered.py MORE FEWER CALLS PROBE_DIR [-v]

An entry is a call from a fn of another file of nika-retry/src, or from the
probe (the generated code), to a fn of the file. A callback that std, core or
tokio hands back (a thread-local's `with`, `Option::map`) returns into the file
that handed it over: no entry.
"""
import collections
import re
import sys


def call_graph(path):
    """Callgrind's calls, as {(caller file, caller, callee file, callee): count}."""
    names = {}
    graph = collections.Counter()
    fl = fn = cfl = cfn = None

    def name(kind, value):
        # Compressed names: `(7) text` the first time, `(7)` after.
        m = re.match(r"\((\d+)\)(?: (.*))?$", value)
        if not m:
            return value
        if m.group(2) is not None:
            names[(kind, m.group(1))] = m.group(2)
        return names[(kind, m.group(1))]

    def same_fn(f):
        # The two generated fns, one per attempt count, are one fn here.
        return re.sub(r"files_entered::(three|two)\b", "files_entered::F", f or "")

    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("fl="):
            fl, cfl = name("fl", line[3:]), None
        elif line.startswith(("fi=", "fe=")):
            name("fl", line[3:])
        elif line.startswith("fn="):
            fn, cfl = name("fn", line[3:]), None
        elif line.startswith(("cfl=", "cfi=")):
            cfl = name("fl", line[4:])
        elif line.startswith("cfn="):
            cfn = name("fn", line[4:])
        elif line.startswith("calls="):
            graph[(fl, same_fn(fn), cfl or fl, same_fn(cfn))] += int(line[6:].split()[0])
            cfl = None
    return graph


def runtime_file(path):
    m = re.search(r"nika-retry/src/(.*)$", path or "")
    return m and m.group(1)


def main():
    more, fewer = call_graph(sys.argv[1]), call_graph(sys.argv[2])
    calls, probe = int(sys.argv[3]), sys.argv[4]
    entries = collections.Counter()
    fns = collections.defaultdict(set)
    for key in set(more) | set(fewer):
        extra = more[key] - fewer[key]
        caller_file, _, callee_file, callee = key
        to, by = runtime_file(callee_file), runtime_file(caller_file)
        from_probe = (caller_file or "").startswith(probe)
        if extra > 0 and to and to != by and (by or from_probe):
            entries[to] += extra
            fns[to].add(callee)
    files = 0
    for path, count in sorted(entries.items(), key=lambda e: (-e[1], e[0])):
        # Less than once a call: set-up or noise, not the attempt's.
        if count / calls < 0.5:
            continue
        files += 1
        print(f"{count / calls:5.1f}  {path}")
        if "-v" in sys.argv:
            for f in sorted(fns[path]):
                print(f"         {f[:160]}")
    print(f"{files} files")


main()
