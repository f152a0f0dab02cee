#!/usr/bin/env python3
"""Runs a `cargo test` command, passing its output through, and stops it if it goes silent.

A test that hangs (a child process that never exits, a wait with no deadline) holds
`cargo test` until CI's own limit kills the whole run, and the last lines it printed then name
only the tests that finished. This watchdog turns such a hang into a failure that says what hung:
when the command prints nothing for `--quiet-limit` seconds, it prints the tests that libtest
reported running for over 60 seconds and never finished, the processes still alive under the
command, and stops them all (its process group), exiting 124 as timeout(1) does.

When the command fails, each panic in a failed test's captured output (the "---- <test> stdout
----" sections libtest prints) is printed again at the end, shortened to its first and last
lines: a failing test's message comes before its backtrace, in the middle of a long output, and
a summary that keeps only an output's head and tail (as CI's does, about 25 lines of the tail)
would otherwise cut it out. Its last lines matter as much as its first: a message that ends
with a service's log (wrangler's, the relayer's) has the service's last words there, after a
banner that says nothing.

Usage: watch_tests.py [--quiet-limit SECONDS] -- COMMAND...
"""

import argparse
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

SLOW = re.compile(r"^test (\S+) has been running for over \d+ seconds")
ENDED = re.compile(r"^test (\S+) \.\.\. (ok|FAILED|ignored)")
CAPTURED = re.compile(r"^---- (\S+) stdout ----$")
PANICKED = re.compile(r"^thread '.*' (\(\d+\) )?panicked at ")
# What follows a panic's message: its backtrace, libtest's note, or the next test's output.
PANIC_ENDS = ("stack backtrace:", "note: ", "---- ", "failures:")
# Panics repeated; of each, the lines kept from its start and from its end (a short summary
# of the run's tail keeps them all for one panic), the lines read, and the characters of a line.
PANICS_REPEATED = 10
PANIC_HEAD_LINES = 4
PANIC_TAIL_LINES = 12
PANIC_LINES_READ = 100_000
PANIC_LINE_CHARS = 300


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quiet-limit", type=float, default=600.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")

    # A session of its own, so that stopping it stops every process it started (the test
    # binaries and their anvil, wrangler dev, PostgreSQL and relayer children) and nothing else.
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    lines: "queue.Queue[bytes | None]" = queue.Queue()

    def read() -> None:
        for line in child.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()

    slow: dict[str, float] = {}
    # (test, the first lines of one of its panics), from the failed tests' captured outputs.
    panics: list[tuple[str, list[str]]] = []
    captured_of = None
    in_panic = False
    out = sys.stdout.buffer
    last = time.monotonic()
    while True:
        try:
            line = lines.get(timeout=5)
        except queue.Empty:
            if time.monotonic() - last >= args.quiet_limit:
                return stop_silent(child, slow, args.quiet_limit)
            continue
        if line is None:
            break
        last = time.monotonic()
        out.write(line)
        out.flush()
        text = line.decode("utf-8", "replace").rstrip("\n")
        if match := SLOW.match(text):
            slow.setdefault(match.group(1), last)
        elif match := ENDED.match(text):
            slow.pop(match.group(1), None)
        if match := CAPTURED.match(text):
            captured_of, in_panic = match.group(1), False
        elif text.startswith("failures:") or ENDED.match(text):
            captured_of, in_panic = None, False
        elif captured_of and PANICKED.match(text) and len(panics) < PANICS_REPEATED:
            panics.append((captured_of, []))
            in_panic = True
        elif in_panic and text.startswith(PANIC_ENDS):
            in_panic = False
        if in_panic and len(panics[-1][1]) < PANIC_LINES_READ and text.strip():
            panics[-1][1].append(text[:PANIC_LINE_CHARS])
    code = child.wait()
    if code != 0 and panics:
        repeat_panics(panics)
    return code


def repeat_panics(panics: list) -> None:
    print("\nwatch_tests: the command failed; the failed tests' panics again, first and last lines:")
    for test, lines in panics:
        print(f"  {test}:")
        for text in shortened(lines):
            print(f"    {text}")
    sys.stdout.flush()


def shortened(lines: list) -> list:
    """A panic's first `PANIC_HEAD_LINES` lines (where it panicked, and its message's start) and
    its last `PANIC_TAIL_LINES`, with a line saying how many were left out between them."""
    if len(lines) <= PANIC_HEAD_LINES + PANIC_TAIL_LINES + 1:
        return lines
    left_out = len(lines) - PANIC_HEAD_LINES - PANIC_TAIL_LINES
    return [*lines[:PANIC_HEAD_LINES], f"[... {left_out} lines ...]", *lines[-PANIC_TAIL_LINES:]]


def stop_silent(child: subprocess.Popen, slow: dict, quiet_limit: float) -> int:
    say = lambda message: print(f"watch_tests: {message}", file=sys.stderr, flush=True)
    say(f"nothing printed for {quiet_limit:.0f} s: a test hangs")
    now = time.monotonic()
    for name, since in sorted(slow.items(), key=lambda item: item[1]):
        say(f"  still running after {now - since + 60:.0f} s or more: {name}")
    if not slow:
        say("  no test reported running for over 60 s (the hang is outside a test)")
    say("processes still alive under the command:")
    tree = subprocess.run(
        ["ps", "-o", "pid,ppid,etime,time,args", "--forest", "-g", str(child.pid)],
        capture_output=True,
        text=True,
    )
    sys.stderr.write(tree.stdout)
    sys.stderr.flush()
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            break
        try:
            child.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            pass
    return 124


if __name__ == "__main__":
    sys.exit(main())
