"""Where things are, for tests at any depth below tests/."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
HOSTS = FIXTURES / "hosts"
XSD = REPO / "glueinfo" / "sss" / "xsd"
