"""Run one command on every node of a Slurm hostlist through ``srun`` and collect one JSON document per node.

One job step, one task per node (``srun --nodes=N --ntasks-per-node=1 --label``). Each task runs a small ``sh``
wrapper that prints a header line (a per-run token and ``$SLURMD_NODENAME``), runs the command under coreutils
``timeout`` (the per-node limit) and prints a trailer line with its exit status. The header maps srun's task label
to a node, the trailer proves the node finished; everything between is the node's stdout, parsed as one JSON object.

srun does not hand a task's long line over whole: slurmstepd forwards stdout in messages of at most
SRUN_MESSAGE_BYTES, and ``--label`` prints each message as its own labelled line (a newline added after a cut, the
cut anywhere, even inside a UTF-8 character). So a node's answer is the concatenation of its lines' bytes, newlines
dropped: a JSON text's newlines are only whitespace between tokens (a newline inside a string is invalid JSON), so
a one-line answer cut into pieces and an indented answer both read back as the document the node printed.

A node that is not usable in Slurm (down, drained, not responding), never starts, times out, exits with an
unexpected status or prints something other than a JSON object is *unreachable* with a one-line reason. The whole
run is bounded: srun is killed at ``timeout_s + launch_timeout_s + KILL_GRACE_S`` whatever the nodes do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import re
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from dsctl.errors import InputError
from dsctl.names import ascii_digits
from dsctl.output.emit import JSON_INDENT_ENV
from dsctl.output.temporaries import scratch_file
from dsctl.runners.process import require, started, stop_group
from dsctl.runners.slurm_nodes import (
    MAX_ARG_CHARS,
    SRUN_HINT,
    hostlist_chunks,
    last_line,
    slurm_states,
    unique_names,
    usable,
)
from dsctl.runners.slurm_nodes import MAX_HOSTLIST_CHARS as MAX_HOSTLIST_CHARS
from dsctl.runners.slurm_nodes import MAX_NODES as MAX_NODES
from dsctl.runners.slurm_nodes import USABLE_STATES as USABLE_STATES
from dsctl.runners.slurm_nodes import drain_node as drain_node
from dsctl.runners.slurm_nodes import expand_hostlist as expand_hostlist
from dsctl.runners.slurm_nodes import node_drain_state as node_drain_state
from dsctl.runners.slurm_nodes import parse_sinfo_states as parse_sinfo_states
from dsctl.runners.slurm_nodes import valid_node_name as valid_node_name

# Slurm's view of nodes (hostlists, sinfo states, drain) lives in dsctl.runners.slurm_nodes; its names stay
# importable from here ("X as X": re-exported)
from dsctl.units import DAY_S

#: bytes of stdout kept per node; a node printing more is unreachable ("output over ... bytes")
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
#: the longest piece of a task's output line that srun prints as one line (slurmstepd's MAX_MSG_LEN, Slurm
#: 20-24): a longer line arrives as several labelled lines
SRUN_MESSAGE_BYTES = 1024
#: a longer stdout line makes its node's output "over the limit" (srun cuts lines at SRUN_MESSAGE_BYTES; another
#: launcher may pass a node's one-line answer whole, with the label in front)
MAX_LINE_CHARS = MAX_OUTPUT_BYTES + 64
#: longer stderr lines (a task's or srun's own) are cut
MAX_STDERR_LINE_CHARS = 1024 * 1024
#: stderr lines kept per task, and srun's own lines kept in all
STDERR_LINES = 20
SRUN_LINES = 20000
#: seconds between SIGTERM and SIGKILL, on the node (``timeout -k``) and for srun itself
KILL_GRACE_S = 5.0
#: srun options the runner sets itself (an extra argument may not override them)
FIXED_SRUN_OPTIONS = frozenset({"--job-name", "--nodes", "--ntasks", "--ntasks-per-node", "--nodelist", "--label",
                                "--kill-on-bad-exit", "--no-kill", "--wait", "--immediate", "--time", "--partition",
                                "--input"})
#: most characters of standard input one run hands every node (a burn-in round's spec: 412 KB at 2,048 nodes of 8
#: NICs, about 6.6 MB at the burn-in's bound of 32,768)
MAX_STDIN_CHARS = 16 << 20

# The wrapper each task runs: $1 token, $2 per-node timeout in seconds, then the command. The command reads
# nothing (</dev/null), or with ``stdin_text`` srun's standard input, which ``--input=all`` gives every task.
# A dsctl command on the node prints its JSON answer as one line (DSCTL_JSON_INDENT=0, whatever srun passed on
# from the caller's environment): the head node then handles a few lines per node, not thousands (issue 32);
# an older dsctl's indented answer still parses.
WRAPPER = ('tok=$1; lim=$2; shift 2; '
           'printf "%s node=%s\\n" "$tok" "${SLURMD_NODENAME:-$(hostname -s)}"; '
           f'{JSON_INDENT_ENV}=0 timeout -k {KILL_GRACE_S:g}' ' "$lim" "$@" </dev/null; rc=$?; '
           'printf "\\n%s exit=%d\\n" "$tok" "$rc"')
WRAPPER_WITH_INPUT = WRAPPER.replace(' </dev/null;', ';')
_LABEL = re.compile(r"^\s*([0-9]{1,9}): ?(.*)$")  # srun's task label (at most 9 digits: never a huge int())
_SRUN_TASK = re.compile(r"srun: error: (\S+): tasks? [\d,\-]+: (.*)$")
_SRUN_LAUNCH = re.compile(r"srun: error: Task launch for \S+ failed on node (\S+): (.*)$")


@dataclass(frozen=True)
class NodeAnswer:
    """What one node gave back. ``document`` is its JSON object when it answered, else ``None`` and ``reason``
    says why (one line). ``exit_code`` is the command's status on the node (``None`` when it never finished)."""

    node: str
    document: dict[str, Any] | None
    exit_code: int | None = None
    reason: str = ""
    stderr_tail: str = ""

    @property
    def answered(self) -> bool:
        return self.document is not None


@dataclass(frozen=True)
class FleetRun:
    """Answers in the order of the requested nodes, the srun command used and the wall time in seconds."""

    answers: tuple[NodeAnswer, ...]
    srun_argv: tuple[str, ...] = ()
    wall_s: float = 0.0
    srun_exit_code: int | None = None
    srun_messages: tuple[str, ...] = ()


@dataclass
class TaskOutput:
    """Lines one srun task printed (label = srun's task id), split around the wrapper's header and trailer.
    ``stdout`` lines are decoded with ``surrogateescape``: a UTF-8 character that srun cut between two lines
    comes back whole when the lines' bytes are joined (:func:`answer_text`)."""

    node: str | None = None
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    exit_code: int | None = None
    num_bytes: int = 0


def srun_argv(srun: str, nodes: Sequence[str], command: Sequence[str], *, token: str, timeout_s: float,
              launch_timeout_s: float, partition: str | None, job_name: str,
              extra_args: Sequence[str] = (), nodelist: str | None = None, stdin: bool = False) -> list[str]:
    """The srun command line: one task per node, labelled output, no kill on a bad node, a job time limit.

    ``nodelist`` is srun's --nodelist as :func:`_nodelist` gives it (a hostlist, or the path of a names file);
    without it the names must compress into one hostlist argument of MAX_ARG_CHARS. ``stdin``: every task's
    command reads srun's standard input (``--input=all``), else none does."""
    minutes = max(1, math.ceil((timeout_s + launch_timeout_s + 2 * KILL_GRACE_S) / 60.0))
    if nodelist is None:
        chunks = hostlist_chunks(nodes)
        if len(chunks) > 1:
            raise InputError(f"{len(nodes):,} node names do not compress into one Slurm hostlist of at most "
                             f"{MAX_ARG_CHARS:,} characters (srun's --nodelist)",
                             hint="use names with a common prefix and a number (gpu00001...), or fewer nodes "
                                  "per run")
        nodelist = chunks[0]
    argv = [srun, f"--job-name={job_name}", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}",
            "--ntasks-per-node=1", f"--nodelist={nodelist}", "--label", "--kill-on-bad-exit=0",
            "--no-kill", "--wait=0", f"--immediate={max(1, math.ceil(launch_timeout_s))}", f"--time={minutes}"]
    if partition:
        argv.append(f"--partition={partition}")
    if stdin:
        argv.append("--input=all")
    argv += list(extra_args)
    wrapper = WRAPPER_WITH_INPUT if stdin else WRAPPER
    return [*argv, "sh", "-c", wrapper, "sh", token, f"{timeout_s:g}", *command]


class LabelledOutput:
    """Incremental parser of srun ``--label`` output, split into tasks. Lines before a task's header belong to
    nobody (srun's or the node's own noise); after the trailer nothing is kept; a missing trailer leaves
    ``exit_code`` ``None``. Memory is bounded: MAX_OUTPUT_BYTES of stdout and the last STDERR_LINES lines of stderr
    per task, SRUN_LINES of srun's own lines."""

    def __init__(self, token: str, on_finished: Callable[[TaskOutput], None] | None = None) -> None:
        self.tasks: dict[int, TaskOutput] = {}
        self.srun_lines: list[str] = []
        self._head = f"{token} node="
        self._tail = f"{token} exit="
        #: called once per task when its trailer arrives (the runner parses the answer then and drops the text)
        self._on_finished = on_finished

    def stdout_line(self, line: str, *, truncated: bool = False) -> None:
        """One stdout line without its newline (undecodable bytes as ``surrogateescape`` gives them);
        ``truncated``: the line was longer than MAX_LINE_CHARS."""
        match = _LABEL.match(line)
        if not match:
            return
        label = int(match.group(1))
        task = self.tasks.get(label)
        if task is None:  # not setdefault, which would build a TaskOutput for every line
            task = self.tasks[label] = TaskOutput()
        text = match.group(2)
        if task.node is None:
            if text.startswith(self._head) and not truncated:
                task.node = text[len(self._head):].strip()
            return
        if task.exit_code is not None:
            return
        if text.startswith(self._tail) and not truncated:
            value = text[len(self._tail):].strip()
            task.exit_code = int(value) if ascii_digits(value) and len(value) <= 3 else 255
            if task.stdout and task.stdout[-1] == "":
                task.stdout.pop()  # the wrapper's newline before the trailer
            if self._on_finished is not None:
                self._on_finished(task)
            return
        task.num_bytes += MAX_OUTPUT_BYTES + 1 if truncated else len(text) + 1
        if task.num_bytes <= MAX_OUTPUT_BYTES:
            task.stdout.append(text)

    def stderr_line(self, line: str, *, truncated: bool = False) -> None:
        """One stderr line: a task's (last STDERR_LINES kept) or srun's own (``truncated`` lines are cut)."""
        match = _LABEL.match(line)
        if match:
            lines = self.tasks.setdefault(int(match.group(1)), TaskOutput()).stderr
            lines.append(match.group(2)[:MAX_STDERR_LINE_CHARS])
            del lines[:-STDERR_LINES]
        elif line.startswith("srun:") and len(self.srun_lines) < SRUN_LINES:
            self.srun_lines.append(line[:MAX_STDERR_LINE_CHARS])


def parse_labelled(stdout: str, stderr: str, token: str) -> dict[int, TaskOutput]:
    """:class:`LabelledOutput` over whole texts (srun splits on newlines only: a JSON string may hold U+2028)."""
    parser = LabelledOutput(token)
    for line in stdout.split("\n"):
        parser.stdout_line(line)
    for line in stderr.split("\n"):
        parser.stderr_line(line)
    return parser.tasks


def srun_errors(stderr: str) -> dict[str, str]:
    """srun's own per-node error lines -> node -> text: ``srun: error: n5: task 4: Exited with exit code 3`` and
    ``srun: error: Task launch for StepId=3.0 failed on node n4: Socket timed out on send/recv operation``."""
    found: dict[str, str] = {}
    for line in stderr.splitlines():
        match = _SRUN_TASK.search(line) or _SRUN_LAUNCH.search(line)
        if match:
            found.setdefault(match.group(1), match.group(2).strip())
    return found


def classify(node: str, task: TaskOutput | None, *, timeout_s: float, ok_exit_codes: Iterable[int],
             srun_reason: str = "") -> NodeAnswer:
    """One node's answer: its JSON object, or unreachable with the reason."""
    tail = "\n".join(task.stderr[-5:]) if task is not None else ""
    last_err = last_line(tail)
    if task is None or task.node is None:
        return NodeAnswer(node, None, None, srun_reason or "the srun task never started on this node", tail)
    if task.exit_code is None:
        why = srun_reason or f"no answer within {timeout_s:g} s (the srun step was stopped)"
        return NodeAnswer(node, None, None, why, tail)
    code = task.exit_code
    if code in (124, 137):
        return NodeAnswer(node, None, code, f"no answer within {timeout_s:g} s (killed on the node)", tail)
    if code not in set(ok_exit_codes):
        return NodeAnswer(node, None, code, f"exit {code}" + (f": {last_err}" if last_err else ""), tail)
    if task.num_bytes > MAX_OUTPUT_BYTES:
        return NodeAnswer(node, None, code, f"output over {MAX_OUTPUT_BYTES} bytes", tail)
    try:
        doc = json.loads(answer_text(task.stdout))
    except (ValueError, RecursionError):
        shown = next((line.strip() for line in task.stdout if line.strip()), "(nothing)")[:60]
        return NodeAnswer(node, None, code, f"output is not JSON: {shown!r}", tail)
    if not isinstance(doc, dict):
        return NodeAnswer(node, None, code, f"output is JSON {type(doc).__name__}, not an object", tail)
    return NodeAnswer(node, doc, code, "", tail)


def answer_text(lines: Sequence[str]) -> str:
    """A node's stdout as one text: its lines' bytes joined without the newlines (srun's cuts and the JSON text's
    own line breaks alike), decoded as UTF-8 (bytes that are not UTF-8 replaced)."""
    joined = "".join(lines)
    if joined.isascii():
        return joined
    try:
        return joined.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that no undecodable byte gave (not srun's output): kept as is
        return joined


def assemble(nodes: Sequence[str], tasks: dict[int, TaskOutput], stderr: str, *, timeout_s: float,
             ok_exit_codes: Iterable[int], whole_step_reason: str = "") -> tuple[NodeAnswer, ...]:
    """Match tasks to requested nodes through their header line and classify each node."""
    by_node: dict[str, TaskOutput] = {}
    for task in tasks.values():
        if task.node is not None:
            by_node.setdefault(task.node, task)
    per_node = srun_errors(stderr)
    codes = tuple(ok_exit_codes)
    return tuple(classify(n, by_node.get(n), timeout_s=timeout_s, ok_exit_codes=codes,
                          srun_reason=whole_step_reason or (f"srun: {per_node[n]}" if n in per_node else ""))
                 for n in nodes)


def run_on_nodes(nodes: Sequence[str], command: Sequence[str], *, timeout_s: float = 60.0,
                 launch_timeout_s: float = 60.0, partition: str | None = None, ok_exit_codes: Iterable[int] = (0,),
                 job_name: str = "dsctl-fleet", extra_srun_args: Sequence[str] = (),
                 check_states: bool = True,
                 digest: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 stdin_text: str | None = None, report: Callable[[float, float], None] | None = None) -> FleetRun:
    """Run ``command`` (argv, no shell) once on every node in ``nodes`` through one srun step.

    ``stdin_text``: what every node's command reads on its standard input (srun ``--input=all``; at most
    MAX_STDIN_CHARS): how a large request travels, never in argv (Linux refuses one argv string above 128 KiB).

    ``timeout_s`` bounds the command on each node (coreutils ``timeout``); ``launch_timeout_s`` bounds getting the
    allocation and starting the tasks. Nodes Slurm reports as not usable are not asked (unreachable with their
    state and reason). ``ok_exit_codes`` lists statuses whose stdout counts as an answer (``dsctl health check``
    exits 1 on a finding and still prints its report).

    Each node's answer is parsed once, as soon as its task ends, and only ``digest(document)`` is kept (the
    caller's typed summary, e.g. the listed findings of a health report); the text and the full document are
    dropped then, so memory holds the answers still arriving plus the digests, not every node's whole answer.
    ``report(nodes_done, nodes)`` counts the nodes answered (or skipped) so far, from srun's reader thread.
    """
    if not command:
        raise InputError("no command to run on the nodes")
    if not 0 < timeout_s <= DAY_S or not 0 < launch_timeout_s <= DAY_S:
        raise InputError(f"timeouts must be in (0, {DAY_S:.0f}] seconds")
    if stdin_text is not None and len(stdin_text) > MAX_STDIN_CHARS:
        raise InputError(f"the nodes' input is {len(stdin_text):,} characters; at most {MAX_STDIN_CHARS:,}")
    nodes = unique_names(nodes)
    srun = require("srun", SRUN_HINT)
    start = time.monotonic()
    skipped: dict[str, NodeAnswer] = {}
    if check_states:
        states = slurm_states(nodes, partition)
        for name in nodes:
            if name not in states:
                where = f" in partition {partition}" if partition else ""
                skipped[name] = NodeAnswer(name, None, None, f"not a Slurm node{where}")
            elif not usable(states[name][0]):
                state, reason = states[name]
                skipped[name] = NodeAnswer(name, None, None, f"Slurm state {state}"
                                           + (f" ({reason})" if reason else ""))
    asked = [n for n in nodes if n not in skipped]
    if report is not None:
        report(len(skipped), len(nodes))
    if not asked:
        return FleetRun(tuple(skipped[n] for n in nodes), (), time.monotonic() - start, None)
    token = "@@dsctl-fleet-" + secrets.token_hex(8)
    codes = tuple(ok_exit_codes)
    early: dict[str, NodeAnswer] = {}

    def finished(task: TaskOutput) -> None:
        if task.node is None or task.node in early:
            return
        answer = classify(task.node, task, timeout_s=timeout_s, ok_exit_codes=codes)
        if answer.document is not None and digest is not None:
            answer = dataclasses.replace(answer, document=digest(answer.document))
        early[task.node] = answer
        task.stdout = []  # parsed: the text is not needed again
        if report is not None:
            report(min(len(skipped) + len(early), len(nodes)), len(nodes))

    parser = LabelledOutput(token, finished)
    with _nodelist(asked) as nodelist:
        argv = srun_argv(srun, asked, command, token=token, timeout_s=timeout_s, launch_timeout_s=launch_timeout_s,
                         partition=partition, job_name=job_name, extra_args=extra_srun_args, nodelist=nodelist,
                         stdin=stdin_text is not None)
        code, stopped = _run_bounded(argv, timeout_s + launch_timeout_s + KILL_GRACE_S, parser, stdin_text)
    tasks = parser.tasks
    stderr = "\n".join(parser.srun_lines)
    whole = ""
    if not any(t.node for t in tasks.values()):
        whole = (f"srun: {_srun_message(stderr)}" if _srun_message(stderr)
                 else f"no answer within {timeout_s:g} s" if stopped else f"srun exited {code} with no output")
        if "invalid partition" in whole.lower():
            raise InputError(f"--partition {partition}: {whole}", hint="list partitions with: sinfo -s")
    pending = [n for n in asked if n not in early]
    answers = assemble(pending, tasks, stderr, timeout_s=timeout_s, ok_exit_codes=codes,
                       whole_step_reason=whole) if pending else ()
    got = {**early, **{a.node: a for a in answers}}
    ordered = tuple(skipped[n] if n in skipped else got[n] for n in nodes)
    if report is not None:
        report(len(nodes), len(nodes))
    return FleetRun(ordered, tuple(argv), time.monotonic() - start, code, tuple(parser.srun_lines[-20:]))


@contextlib.contextmanager
def _nodelist(nodes: Sequence[str]) -> Iterator[str]:
    """srun's --nodelist for ``nodes`` while the block runs: their compressed hostlist, or, when they do not
    compress into one argument, the path of a private file of names, one a line (srun reads a value that
    contains "/" as such a file), removed afterwards."""
    chunks = hostlist_chunks(nodes)
    if len(chunks) == 1:
        yield chunks[0]
        return
    with scratch_file("nodes", "".join(f"{n}\n" for n in nodes), prefix="dsctl-fleet-") as path:
        yield str(path.absolute())


def _run_bounded(argv: Sequence[str], deadline_s: float, parser: LabelledOutput,
                 stdin_text: str | None = None) -> tuple[int | None, bool]:
    """Run srun, feeding its output to ``parser`` as it comes (and ``stdin_text`` to its standard input, then
    closing it), stopping srun (SIGTERM, then SIGKILL) at ``deadline_s``; return its exit status and whether it
    was stopped."""
    stopped = False
    # Ctrl-C, SIGTERM or SIGHUP to dsctl: SIGTERM to srun's group (srun cancels the step), then dsctl exits
    # bytes: stdout lines decode with surrogateescape (a character srun cut in two is joined back whole), stderr
    # lines with replacement characters (they are printed)
    with started(argv, only=signal.SIGTERM, binary=True,
                 stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        readers = [threading.Thread(target=_pump, args=(proc.stdout, parser.stdout_line, MAX_LINE_CHARS,
                                                        "surrogateescape"), daemon=True),
                   threading.Thread(target=_pump, args=(proc.stderr, parser.stderr_line, MAX_STDERR_LINE_CHARS,
                                                        "replace"), daemon=True)]
        if stdin_text is not None:
            readers.append(threading.Thread(target=_feed, args=(proc.stdin, stdin_text.encode("utf-8", "replace")),
                                            daemon=True))
        for reader in readers:
            reader.start()
        try:
            proc.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            stopped = True
            stop_group(proc, signal.SIGTERM, KILL_GRACE_S)  # srun forwards it to the tasks and cancels the step
    end = time.monotonic() + KILL_GRACE_S
    for reader in readers:
        reader.join(timeout=max(0.0, end - time.monotonic()))
    return proc.returncode, stopped


def _feed(stream: IO[bytes] | None, text: bytes) -> None:
    """Write ``text`` to srun's standard input and close it (srun ends every task's input there); a srun that
    stopped reading (it ended, or never reads) is not an error here: its answers say what happened."""
    if stream is None:
        return
    try:
        stream.write(text)
    except (BrokenPipeError, OSError, ValueError):
        pass
    finally:
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            stream.close()


def _pump(stream: IO[bytes] | None, sink: Callable[..., None], max_bytes: int, errors: str) -> None:
    """Feed ``stream``'s lines to ``sink``, split on b"\\n" only and decoded as UTF-8 with ``errors`` (a line
    longer than ``max_bytes``: its first part, ``truncated``)."""
    if stream is None:
        return
    skipping = False
    while True:
        chunk = stream.readline(max_bytes)
        if not chunk:
            break
        whole = chunk.endswith(b"\n")
        if not skipping:
            sink((chunk[:-1] if whole else chunk).decode("utf-8", errors), truncated=not whole)
        skipping = not whole
    stream.close()


def _srun_message(stderr: str) -> str:
    """srun's last own error line without its ``srun: error:`` prefix."""
    lines = [ln for ln in stderr.splitlines() if ln.startswith("srun:") and not _LABEL.match(ln)]
    if not lines:
        return ""
    return re.sub(r"^srun: (error: )?", "", lines[-1]).strip()
