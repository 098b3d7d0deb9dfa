#!/usr/bin/env bash
# BENCHMARKS.md's current figures, from one commit, by this one script: it
# builds the benches of the checked-out tree, counts every contender's
# instructions per call with cachegrind (benches/instructions.sh), prints
# the future-size and allocation tables that benches/retry_paths.rs
# computes, times each contender's CPU per call once, and writes it all
# as Markdown tables naming the commit once.
#
#   bash benches/report.sh            # prints the figures
#   bash benches/report.sh --write    # and replaces them in BENCHMARKS.md
#                                     # and docs/comparisons.md (between the
#                                     # `report.sh` markers)
#
# The instruction counts, sizes and allocations are exact and load-
# independent; the CPU times are one run's and move with the machine's load
# (printed beside them). `.ci/same-figures` checks that docs/comparisons.md's copy of
# the peers table is BENCHMARKS.md's. Needs valgrind and python3. Takes about
# 10 minutes of CPU on the 2-core machine of BENCHMARKS.md, most of it the
# release build. Environment: CARGO_TARGET_DIR (default target/), CALLS
# (see benches/instructions.sh).
set -euo pipefail

# All in one function, which bash reads whole before running it: editing
# this file while it runs cannot change what runs.
main() {
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
WRITE=${1:-}

commit=$(git rev-parse --short=7 HEAD)
if [[ -n $(git status --porcelain --untracked-files=no -- nika-retry nika-retry-macros benches Cargo.toml Cargo.lock) ]]; then
    commit="$commit (with uncommitted changes)"
fi

echo "building the benches (release) ..." >&2
# Without feature `opentelemetry` (on by default in the root package): the
# figures of a user who records no metrics, comparable run to run; what the
# metrics add is benches/metrics.rs's (BENCHMARKS.md, "Metrics").
cargo bench --no-default-features --bench retry_paths --bench stream_items --no-run >/dev/null 2>&1
newest() { ls -t "$TARGET"/release/deps/"$1"-* | grep -v '\.d$' | head -1; }
paths_bin=$(newest retry_paths)
stream_bin=$(newest stream_items)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "sizes and allocations ..." >&2
"$paths_bin" --bench '^zzz$' >"$work/tables.md" 2>/dev/null

echo "CPU time per call, one run ..." >&2
load=$(cut -d' ' -f1-3 /proc/loadavg)
RETRY_PATHS_CPU=10000000 "$paths_bin" >"$work/cpu.txt" 2>/dev/null

echo "instructions per call (cachegrind) ..." >&2
contenders=(
    success/plain success/retry success/retry_upstream success/hand_loop success/backon
    success/tokio_retry success/retry_timeout success/hand_timeout success/minimal
    success/minimal_timeout success/nest success/minimal_nest success/nest_timeout
    success/minimal_timeout_nest
    failure/retry failure/retry_upstream failure/hand_loop failure/backon failure/tokio_retry
    failure/retry_timeout failure/hand_timeout failure/minimal failure/minimal_timeout
    pending/plain pending/retry_read pending/retry_attempt pending/read_alone pending/hand_timeout
)
bash benches/instructions.sh "$paths_bin" "${contenders[@]}" >"$work/instructions.md"
BENCH=stream_items bash benches/instructions.sh "$stream_bin" \
    stream_items/raw stream_items/started stream_items/started_read \
    stream_items/tokio_stream_timeout stream_items/sse_raw stream_items/sse_started \
    >"$work/stream.md"

python3 - "$work" "$commit" "$load" "$(rustc --version)" >"$work/report.md" <<'PY'
import re, sys
work, commit, load, rustc = sys.argv[1:5]

def rows(path):
    """The `| a | b | ... |` rows of a Markdown table file, header and rule dropped."""
    out = []
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if line.startswith('|') and not set(line.strip()) <= set('|-: ') and cells[0] != 'contender':
            out.append(cells)
    return out

instr = {c: float(n) for c, n in rows(f'{work}/instructions.md')}
stream = {c: float(n) for c, n in rows(f'{work}/stream.md')}
cpu = {}
for line in open(f'{work}/cpu.txt'):
    m = re.match(r'cpu (\w+) (\S+) ([\d.]+) ns', line)
    if m:
        cpu[f'{m[1]}/{m[2]}'] = float(m[3])

# The bench's own tables, split by their `## ` headings.
tables, name = {}, None
for line in open(f'{work}/tables.md'):
    if line.startswith('## '):
        name = line[3:].split(' (')[0].strip()
        tables[name] = []
    elif name:
        tables[name].append(line.rstrip('\n'))
def table_rows(lines):
    out = []
    for line in lines:
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if line.startswith('|') and not set(line.strip()) <= set('|-: ') and cells[0] != 'contender':
            out.append(cells)
    return out

size = {r[0]: r[1:] for r in table_rows(tables['Future sizes'])}
alloc = {r[0]: r[1:] for r in table_rows(tables['Heap allocations'])}
pending = {r[0]: r[1:] for r in table_rows(tables['Pending path'])}

def n(x):
    """A count as BENCHMARKS.md writes it: a thin space every three digits."""
    s = f'{x:.1f}'.rstrip('0').rstrip('.')
    whole, _, frac = s.partition('.')
    whole = re.sub(r'(\d)(?=(\d{3})+$)', r'\1 ', whole)
    return whole + ('.' + frac if frac else '')

def signed(x):
    return ('+' if x >= 0 else '−') + n(abs(x))

def ns(x):
    return f'{x / 1000:.2f} µs' if x >= 1000 else f'{x:.1f} ns'

def ratio(a, b):
    return f'{a / b:.2f}×'

P = []
p = P.append
p(f'All figures of this section: commit `{commit}`, {rustc}, `bash benches/report.sh`.')
p('Instructions per call are counted by cachegrind (exact: no other process moves them);')
p(f'sizes and allocations are exact; CPU times are one run (`RETRY_PATHS_CPU=10000000`, every')
p(f'contender in turn in one process), at load {load}: they move with the machine, the counts do not.')
p('')
def met(ok):
    return '**met**' if ok else '**not met**'
def alloc0(c):
    return all(float(x) == 0 for x in alloc[c][:2] if x != '—')
p('### Against the goals')
p('')
p('The time goals are judged on this run\'s CPU times, which a loaded machine inflates for')
p('the fast contenders (`docs/history.md` has rounds on an idle machine); the instruction ratios beside')
p('them do not move with load.')
p('')
p('| goal | figure | met in this run? |')
p('|---|---|---|')
for c, goal, bound in (('retry', '`#[retry]`', 208), ('retry_timeout', '`#[retry] + #[timeout(attempt)]`', 256)):
    b = int(size[c][0])
    p(f'| future size {goal} ≤ {bound} B | {b} B | {met(b <= bound)} |')
for c, m, goal in (('retry', 'minimal', 2.0), ('retry_timeout', 'minimal_timeout', 2.0)):
    r = cpu[f'success/{c}'] / cpu[f'success/{m}']
    p(f'| success path, `{c}` ≤ {goal:g}× `{m}` in CPU time | {ns(cpu[f"success/{c}"])} vs {ns(cpu[f"success/{m}"])}: {r:.2f}× '
      f'({n(instr[f"success/{c}"])} vs {n(instr[f"success/{m}"])} instructions: {ratio(instr[f"success/{c}"], instr[f"success/{m}"])}) | {met(r <= goal)} |')
r = cpu['failure/retry'] / cpu['failure/minimal']
ri = instr['failure/retry'] / instr['failure/minimal']
p(f'| failure path, `retry` ≤ 1.05× `minimal` | CPU time {ns(cpu["failure/retry"])} vs {ns(cpu["failure/minimal"])}: {r:.2f}×; '
  f'{n(instr["failure/retry"])} vs {n(instr["failure/minimal"])} instructions: {ri:.2f}× | {met(r <= 1.05 and ri <= 1.05)} |')
ok = all(alloc0(c) for c in ('retry', 'retry_timeout', 'retry_upstream', 'nest', 'nest_timeout') if c in alloc)
p(f'| 0 allocations per call, success and failure paths (`retry`, `retry_timeout`, `retry_upstream`, the nests) | '
  + ', '.join(f'{c} {float(alloc[c][0]):g} / {float(alloc[c][1]):g}' for c in ('retry', 'retry_timeout', 'retry_upstream') if c in alloc)
  + f' | {met(ok)} |')
d_i = instr['success/retry_upstream'] - instr['success/retry']
d_t = cpu['success/retry_upstream'] - cpu['success/retry']
p(f'| an open upstream: a few ns over `retry` on the success path, no allocation | {signed(d_i)} instructions, {d_t:+.1f} ns (one run), '
  f'{float(alloc["retry_upstream"][0]):g} allocations | {met(d_i <= 50 and alloc0("retry_upstream"))} (instructions ≤ +50, the time read from them) |')
p('')
p('### Against the peers')
p('')
p('<!-- report.sh peers: begin -->')
peers = [('retry', '`#[retry]`'), ('hand_loop', 'hand-written loop'), ('minimal', 'minimal hand loop'),
         ('backon', 'backon'), ('tokio_retry', 'tokio-retry')]
p('| | ' + ' | '.join(h for _, h in peers) + ' |')
p('|---|' + '---:|' * len(peers))
p('| success path, instructions per call | ' + ' | '.join(n(instr[f'success/{c}']) for c, _ in peers) + ' |')
p('| success path, CPU time per call | ' + ' | '.join(ns(cpu[f'success/{c}']) for c, _ in peers) + ' |')
p('| 2 failures, then success (paused clock), instructions per call | ' + ' | '.join(n(instr[f'failure/{c}']) for c, _ in peers) + ' |')
p('| the same, CPU time per call | ' + ' | '.join(ns(cpu[f'failure/{c}']) for c, _ in peers) + ' |')
p('| future size | ' + ' | '.join(f'{size[c][0]} B' for c, _ in peers) + ' |')
p('| heap allocations per call, success / failure | ' + ' | '.join(f'{float(alloc[c][0]):g} / {float(alloc[c][1]):g}' for c, _ in peers) + ' |')
p(f'| with `#[timeout(attempt)]` (hand loop: `tokio::time::timeout`), success, instructions | '
  + n(instr['success/retry_timeout']) + ' | ' + n(instr['success/hand_timeout']) + ' | '
  + n(instr['success/minimal_timeout']) + ' | | |')
p(f'| the same, future size | {size["retry_timeout"][0]} B | {size["hand_timeout"][0]} B | {size["minimal_timeout"][0]} B | | |')
p('<!-- report.sh peers: end -->')
p('')
p('### Instructions per call, every contender')
p('')
p('| contender | success path | failure path | CPU time, success / failure |')
p('|---|---:|---:|---:|')
names = [c.split('/')[1] for c in instr if c.startswith('success/')]
for c in names:
    f = instr.get(f'failure/{c}')
    cs, cf = cpu.get(f'success/{c}'), cpu.get(f'failure/{c}')
    t = ' / '.join(ns(x) for x in (cs, cf) if x is not None)
    p(f'| `{c}` | {n(instr[f"success/{c}"])} | {n(f) if f is not None else "—"} | {t} |')
p('')
p('Ratios the goals name: success `retry` / `minimal` '
  + ratio(instr['success/retry'], instr['success/minimal'])
  + ', `retry_timeout` / `minimal_timeout` ' + ratio(instr['success/retry_timeout'], instr['success/minimal_timeout'])
  + '; failure `retry` / `minimal` ' + ratio(instr['failure/retry'], instr['failure/minimal'])
  + ' (`hand_loop` ' + ratio(instr['failure/hand_loop'], instr['failure/minimal'])
  + ', backon ' + ratio(instr['failure/backon'], instr['failure/minimal']) + '); an open upstream: `retry_upstream` − `retry` = '
  + signed(instr['success/retry_upstream'] - instr['success/retry']) + ' instructions on the success path, '
  + signed(instr['failure/retry_upstream'] - instr['failure/retry']) + ' on the failure path.')
p('')
p('### Pending path (the attempt waits once on a 1 ms timer; paused clock)')
p('')
p('| contender | instructions per call | future (bytes) | allocations per call |')
p('|---|---:|---:|---:|')
for c, (b, a) in pending.items():
    p(f'| `{c}` | {n(instr[f"pending/{c}"])} | {b} | {a} |')
p('')
p('### Future sizes and heap allocations (`benches/retry_paths.rs`\'s tables)')
p('')
p('| contender | future, success path (bytes) | future, failure path (bytes) | allocations per call: success | failure | failure, per attempt |')
p('|---|---:|---:|---:|---:|---:|')
for c, (s_ok, s_fail) in size.items():
    a = alloc.get(c, ['—', '—', '—'])
    p(f'| `{c}` | {s_ok} | {s_fail} | {a[0]} | {a[1]} | {a[2]} |')
for line in tables['Future sizes']:
    if line.startswith('('):
        p('')
        p(line)
p('')
p('### Streamed responses (`benches/stream_items.rs`: 1000 ready items drained)')
p('')
p('| contender | instructions per item | vs `raw` (or `sse_raw`) |')
p('|---|---:|---:|')
for c, v in stream.items():
    base = stream['stream_items/sse_raw'] if 'sse' in c else stream['stream_items/raw']
    p(f'| `{c.split("/")[1]}` | {v / 1000:.2f} | {v / base:.2f}× |')
print('\n'.join(P))
PY

cat "$work/report.md"

if [[ $WRITE == --write ]]; then
    # Replace what lies between the markers: the whole block in
    # BENCHMARKS.md, the peers table in docs/comparisons.md.
    python3 - "$work/report.md" <<'PY'
import re, sys
report = open(sys.argv[1]).read().rstrip('\n')
def put(path, begin, end, text):
    s = open(path).read()
    pat = re.compile(re.escape(begin) + r'.*?' + re.escape(end), re.S)
    if not pat.search(s):
        sys.exit(f'{path}: no {begin} ... {end} block to replace')
    s = pat.sub(lambda _: begin + '\n' + text + '\n' + end, s, count=1)
    open(path, 'w').write(s)
put('BENCHMARKS.md', '<!-- report.sh: begin -->', '<!-- report.sh: end -->', report)
peers = re.search(r'<!-- report.sh peers: begin -->\n(.*?)\n<!-- report.sh peers: end -->', report, re.S)[1]
put('docs/comparisons.md', '<!-- report.sh peers: begin -->', '<!-- report.sh peers: end -->', peers)
PY
    echo "wrote BENCHMARKS.md and docs/comparisons.md" >&2
fi
}
main "$@"
