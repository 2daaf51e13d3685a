#!/usr/bin/env python3
"""CPU used by each process over a window, as a share of one core.

    scripts/cpu-window.py SECONDS [COUNT]

Prints, COUNT times (default 1), the processes that used CPU during SECONDS, busiest
first. Run it next to a benchmark (e.g. `cargo bench --bench distributed -- rest`) to
see which process a load's CPU goes to: utime + stime from /proc/<pid>/stat, so time
the hypervisor steals is not counted.
"""
import os
import sys
import time


def snapshot():
    usage = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        usage[pid] = (name, int(fields[11]) + int(fields[12]))
    return usage


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    ticks = os.sysconf("SC_CLK_TCK")
    for _ in range(count):
        before, started = snapshot(), time.time()
        time.sleep(seconds)
        after, elapsed = snapshot(), time.time() - started
        used = sorted(((after[pid][1] - before[pid][1]) / ticks, after[pid][0]) for pid in after if pid in before)
        busiest = [f"{name} {cpu / elapsed * 100:.0f}%" for cpu, name in reversed(used[-8:]) if cpu > 0]
        print(f"{elapsed:.1f} s: " + ", ".join(busiest), flush=True)


if __name__ == "__main__":
    main()
