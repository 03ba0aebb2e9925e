"""srun's ``--label`` output as the real srun gives it, for tests and benchmarks that run without Slurm.

slurmstepd forwards a task's stdout in messages of at most SRUN_MESSAGE_BYTES (1,024) bytes, a message ending at
the first newline or at the limit, wherever that falls (inside a UTF-8 character too); srun prints each message as
one line with the task's label in front, adding a newline after a message that has none. So a line of 2,600 bytes
arrives as three labelled lines, and a line of exactly 1,024 bytes as two (the second empty). Recorded from Slurm
22.05 in tests/data/fleet/srun_cut_lines.out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from dsctl.runners.fleet import SRUN_MESSAGE_BYTES


def messages(output: bytes, limit: int = SRUN_MESSAGE_BYTES) -> Iterator[bytes]:
    """The pieces slurmstepd forwards of one task's ``output``, each ending with a newline as srun prints it."""
    start = 0
    while start < len(output):
        end = output.find(b"\n", start, start + limit)
        end = start + limit if end < 0 else end + 1
        piece = output[start:end]
        yield piece if piece.endswith(b"\n") else piece + b"\n"
        start = end


def labelled(outputs: Mapping[int, bytes], limit: int = SRUN_MESSAGE_BYTES, width: int | None = None) -> bytes:
    """srun's stdout for tasks ``outputs`` (task id -> the bytes it printed), messages interleaved task by task,
    labels right-aligned to ``width`` (by default the widest task id's, as srun writes them)."""
    width = len(str(max(outputs, default=0))) if width is None else width
    streams = {task: messages(out, limit) for task, out in outputs.items()}
    chunks: list[bytes] = []
    while streams:
        for task in list(streams):
            piece = next(streams[task], None)
            if piece is None:
                del streams[task]
            else:
                chunks.append(f"{task:>{width}}: ".encode() + piece)
    return b"".join(chunks)


def wrapper_output(token: str, node: str, answer: bytes, exit_code: int = 0) -> bytes:
    """What the fleet wrapper prints on ``node`` around a command that printed ``answer``."""
    return f"{token} node={node}\n".encode() + answer + f"\n{token} exit={exit_code}\n".encode()
