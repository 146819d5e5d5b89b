"""A third-party batch system with a key of its own in [ce:NAME] (example_queue_file)."""

import json

from glueinfo.core.model import QueueState
from glueinfo.core.options import Option
from glueinfo.lrms.registry import LrmsPlugin


def query(ctx):
    # The plugin's own key reaches it typed, in its CE's section, with its declared default.
    path = ctx.ce_config["example_queue_file"]
    with open(path, encoding="utf-8") as handle:
        figures = json.load(handle)
    return QueueState(lrms_type="example", queue=ctx.queue, status="Production", total_cpus=figures["total"],
                      free_cpus=figures["free"], running_jobs=figures["running"], waiting_jobs=figures["waiting"],
                      total_jobs=figures["running"] + figures["waiting"],
                      lrms_version=str(ctx.ce_config["example_version"]))


LRMS = LrmsPlugin(name="example", query=query, description="example batch system (queue figures from a JSON file)",
                  config_keys={"example_queue_file": Option("path", "", "JSON file with the queue's figures"),
                               "example_version": Option("int", 7, "the version this example reports")})
