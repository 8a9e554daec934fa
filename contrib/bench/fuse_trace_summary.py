#!/usr/bin/env python3
"""fuse_trace_summary.py OUT CONFIG... - summarize the kernel traces that
bench-ab-readers.sh TRACE=1 saved (OUT/trace.INDEX.REP.gz: ftrace text of
fuse:fuse_request_send/end and sched:sched_switch/sched_wakeup of the dd
readers), per configuration, medians over the runs
(docs/BENCHMARKS.md, "GPU backend through the mount"). A benchmark tool, not a test.

Per run:
- FUSE_READ requests: count, the sum of their kernel latencies (queued to
  replied, ms), p50/p99 (us), the mean number in flight;
- readers (per dd, mean over the readers): ms awake, split into running
  and runnable (woken or preempted, waiting for a CPU; a switch to dd
  from an idle CPU is not recorded, so a dd that runs again without a
  recorded switch is counted as running from its wake-up), ms blocked while a
  read it sent was outstanding, ms blocked otherwise; how often a reader
  was preempted and moved to another CPU;
- per configuration, the tasks that preempted the readers most often (the
  next task of a switch away from a runnable dd).
- the daemon's own request-to-reply sum from its unmount log, where there
  is one (OUT/daemon.INDEX.log, "reads: ... ms from request to reply").
"""
import glob
import gzip
import os
import re
import statistics as st
import sys

EVENT = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([0-9]+\.[0-9]+): (\w+): (.*)$')
KV = re.compile(r'(\w+)=(\S+)')
REQ = re.compile(r'req (\d+)')


def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def overlap(iv, u):
    """Total overlap of intervals iv with the sorted disjoint intervals u."""
    tot, j = 0.0, 0
    for a, b in sorted(iv):
        while j < len(u) and u[j][1] <= a:
            j += 1
        k = j
        while k < len(u) and u[k][0] < b:
            tot += min(b, u[k][1]) - max(a, u[k][0])
            k += 1
    return tot


def one_trace(path, preemptors):
    send, lat, outstanding = {}, [], {}
    state, spans = {}, {}
    first = last = None
    on_cpu, preempted, migrated = {}, {}, {}

    def enter(pid, s, ts):
        old = state.get(pid)
        if old:
            spans.setdefault(pid, []).append((old[0], old[1], ts))
        state[pid] = (s, ts)

    with gzip.open(path, 'rt') as f:
        for line in f:
            m = EVENT.match(line)
            if not m:
                continue
            comm, pid, cpu, ts, name, rest = m.groups()
            ts = float(ts)
            if name == 'fuse_request_send' and 'opcode 15 ' in rest:
                send[REQ.search(rest).group(1)] = (pid if comm == 'dd' else None, ts)
            elif name == 'fuse_request_end':
                x = send.pop(REQ.search(rest).group(1), None)
                if x:
                    lat.append(ts - x[1])
                    first = x[1] if first is None else min(first, x[1])
                    last = ts if last is None else max(last, ts)
                    if x[0]:
                        outstanding.setdefault(x[0], []).append((x[1], ts))
            elif name == 'sched_switch':
                a = dict(KV.findall(rest.replace(' ==> ', ' ')))
                if a.get('prev_comm') == 'dd':
                    old = state.get(a['prev_pid'])
                    if old and old[0] == 'runnable':
                        # switched in from an idle CPU, which this trace's
                        # filter does not record: it ran from then on
                        state[a['prev_pid']] = ('running', old[1])
                    runnable = a['prev_state'].startswith('R')
                    enter(a['prev_pid'], 'runnable' if runnable else 'blocked', ts)
                    if runnable:
                        preempted[a['prev_pid']] = preempted.get(a['prev_pid'], 0) + 1
                        who = re.sub(r'[0-9/:]+$', '', a.get('next_comm', '?')) or '?'
                        preemptors[who] = preemptors.get(who, 0) + 1
                if a.get('next_comm') == 'dd':
                    p = a['next_pid']
                    if p in on_cpu and on_cpu[p] != cpu:
                        migrated[p] = migrated.get(p, 0) + 1
                    on_cpu[p] = cpu
                    enter(p, 'running', ts)
            elif name == 'sched_wakeup':
                a = dict(KV.findall(rest))
                if state.get(a.get('pid'), ('',))[0] == 'blocked':
                    enter(a['pid'], 'runnable', ts)
    if not lat:
        return None
    lat.sort()
    n = len(lat)
    r = {'reads': n, 'latency_sum_ms': 1e3 * sum(lat), 'p50_us': 1e6 * lat[n // 2],
         'p99_us': 1e6 * lat[min(n - 1, int(n * 0.99))],
         'in_flight': sum(lat) / (last - first) if last > first else 0.0}
    readers = []
    for pid, sp in spans.items():
        running = sum(b - a for s, a, b in sp if s == 'running')
        runnable = sum(b - a for s, a, b in sp if s == 'runnable')
        blocked = [(a, b) for s, a, b in sp if s == 'blocked']
        if running + runnable + sum(b - a for a, b in blocked) < 0.02:
            continue
        own = overlap(blocked, union(outstanding.get(pid, [])))
        readers.append((running, runnable, own, sum(b - a for a, b in blocked) - own,
                        preempted.get(pid, 0), migrated.get(pid, 0)))
    if readers:
        r['reader_running_ms'] = 1e3 * st.mean(x[0] for x in readers)
        r['reader_runnable_ms'] = 1e3 * st.mean(x[1] for x in readers)
        r['reader_blocked_on_read_ms'] = 1e3 * st.mean(x[2] for x in readers)
        r['reader_blocked_other_ms'] = 1e3 * st.mean(x[3] for x in readers)
        r['reader_preempted'] = st.mean(x[4] for x in readers)
        r['reader_migrated'] = st.mean(x[5] for x in readers)
    return r


def main():
    if len(sys.argv) < 3:
        sys.exit('usage: fuse_trace_summary.py OUT CONFIG...')
    out, configs = sys.argv[1], sys.argv[2:]
    walls = {}
    for line in open(os.path.join(out, 'runs.txt')):
        f = line.split()
        walls.setdefault(int(f[0]), []).append(int(f[1]))
    keys = ['wall_ms', 'reads', 'latency_sum_ms', 'daemon_sum_ms', 'p50_us', 'p99_us', 'in_flight',
            'reader_running_ms', 'reader_runnable_ms', 'reader_blocked_on_read_ms', 'reader_blocked_other_ms',
            'reader_preempted', 'reader_migrated']
    print('| configuration | runs | ' + ' | '.join(keys) + ' |')
    print('|---|---:|' + '---:|' * len(keys))
    who = {}
    for i, cfg in enumerate(configs):
        rows = []
        preemptors = who.setdefault(cfg, {})
        for path in sorted(glob.glob(os.path.join(out, 'trace.%d.*.gz' % i))):
            rep = int(path.rsplit('.', 2)[1])
            r = one_trace(path, preemptors)
            if r is None:
                continue
            if rep < len(walls.get(i, [])):
                r['wall_ms'] = walls[i][rep]
            rows.append(r)
        log = os.path.join(out, 'daemon.%d.log' % i)
        dsums = []
        if os.path.exists(log):
            dsums = [float(x) for x in re.findall(r'reads: \d+ .*?; ([0-9.]+) ms from request to reply', open(log).read())]
        cells = []
        for k in keys:
            v = dsums if k == 'daemon_sum_ms' else [r[k] for r in rows if k in r]
            cells.append('%.4g' % st.median(v) if v else '-')
        print('| %s | %d | %s |' % (cfg, len(rows), ' | '.join(cells)))
    print('(medians over the runs; see the header of contrib/bench/fuse_trace_summary.py)')
    for cfg, p in who.items():
        top = sorted(p.items(), key=lambda kv: -kv[1])[:6]
        print('%s: readers preempted by (all runs): %s' % (cfg, ', '.join('%s %d' % kv for kv in top) or '-'))


if __name__ == '__main__':
    main()
