"""The daemon's one-arena malloc policy (glueinfo.run.malloc_policy), read back from glibc itself:
malloc_info() prints one <heap nr="N"> element per arena."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from glueinfo.run.malloc_policy import operator_choice, use_one_arena

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# A thread that allocates after the policy (or none) is applied; then glibc's own account of its arenas.
PROBE = textwrap.dedent("""
    import ctypes, os, sys, tempfile, threading
    sys.path.insert(0, sys.argv[2])
    from glueinfo.run.malloc_policy import use_one_arena
    applied = use_one_arena(os.environ) if sys.argv[1] == "policy" else False
    kept = []
    def allocate():
        kept.append([str(i) * 3 for i in range(200_000)])
    worker = threading.Thread(target=allocate)
    worker.start()
    worker.join()
    libc = ctypes.CDLL("libc.so.6")
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
    libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
    libc.fclose.argtypes = (ctypes.c_void_p,)
    path = tempfile.mktemp()
    stream = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    with open(path) as handle:
        print(applied, handle.read().count("<heap nr="))
    os.unlink(path)
""")


def arenas(mode: str, **environ: str) -> tuple[str, int]:
    env = {key: value for key, value in os.environ.items() if key not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    env.update(environ)
    out = subprocess.run([sys.executable, "-c", PROBE, mode, ROOT], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    return out[0], int(out[1])


def test_a_thread_allocates_in_the_one_arena_under_the_policy() -> None:
    assert arenas("default") == ("False", 2)  # glibc's own way: the thread got an arena of its own
    assert arenas("policy") == ("True", 1)


def test_an_operators_own_arena_setting_is_left_alone() -> None:
    assert arenas("policy", MALLOC_ARENA_MAX="4") == ("False", 2)
    assert operator_choice({"GLIBC_TUNABLES": "glibc.malloc.mxfast=0:glibc.malloc.arena_max=2"})
    assert not operator_choice({"GLIBC_TUNABLES": "glibc.malloc.mxfast=0"})
    assert not use_one_arena({"MALLOC_ARENA_MAX": "2"})
