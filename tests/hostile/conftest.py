"""The hostile-input suite: real glueinfo processes driven only through the
CLI and HTTP on loopback (tests/harness/glueinfo_processes.py), so every
test here means the same against any version of the code.  Each test names
the case of issue 12 it holds; keep the suite growing with every hostile
input found."""
