"""Two tiny collectors: one on by default, one a site must enable."""

from glueinfo.collect import Collector


def collect(ctx):
    # Facts are a dict of JSON values; glueinfo keeps them in snapshot.extra["example"].
    return {"answer": 42, "live": ctx.live, "greeting": "Grüße"}


def collect_off(ctx):
    return {"enabled_by": "configuration"}


COLLECTOR = Collector(name="example", collect=collect, default_enabled=True, description="example plugin fact")
OFF_BY_DEFAULT = Collector(name="example_off", collect=collect_off, default_enabled=False)
