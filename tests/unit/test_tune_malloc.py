"""runtime.tune_malloc: a serving process keeps one answer's memory for the
next instead of handing it back to the system and faulting it in again
(issue 30: a list of 1,000 providers took 525 page faults per request)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from placement_svc.cmd import runtime

pytestmark = pytest.mark.skipif(runtime._mallopt is None, reason="glibc's mallopt only")

# An answer's shape: its body, the body joined into the envelope and encoded,
# and the copy the HTTP layer writes out, all alive at once, then freed.
_ANSWERS = textwrap.dedent(
    """
    import resource, sys
    from placement_svc.cmd import runtime
    if sys.argv[1] == "tuned":
        assert runtime.tune_malloc() is True
    def answer():
        body = "x" * 750_000
        encoded = ("[" + body + "]").encode()
        out = bytearray()
        out += encoded
        return len(out)
    answer()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        answer()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 20)
    """
)


def _faults_per_answer(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _ANSWERS, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


def test_answers_of_megabytes_fault_their_pages_in_each_time_by_default():
    # 3 MB of blocks per answer: most of their 4 KB pages, every time.
    assert _faults_per_answer("plain") > 300


def test_tuned_the_next_answer_reuses_the_memory_of_the_last():
    assert _faults_per_answer("tuned") < 10
