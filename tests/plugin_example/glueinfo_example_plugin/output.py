"""A third-party output with a section of its own ([output:example-summary]): each publish writes
one line per CE, 'CE_ID FREE_CPUS', to its ``path``, and counts what it was handed."""

from glueinfo.core.options import Option
from glueinfo.publish.outputs import OutputPlugin, OutputResult


class SummaryOutput:
    name = "example-summary"

    def __init__(self, path, prefix):
        self.path, self.prefix = path, prefix

    def publish(self, publication):
        documents = publication.documents
        if documents is None:  # nothing changed since the last publish
            return OutputResult(note="summary unchanged")
        lines = [f"{self.prefix}{ce} {state.free_cpus}" for ce, state in sorted(documents.site.states.items())]
        with open(self.path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
        return OutputResult(note=f"summary of {len(lines)} CEs", written=True)


def make(context):
    section = context.sections["output:example-summary"]
    if not section["path"]:
        raise ValueError("[output:example-summary] path is not set")
    return SummaryOutput(section["path"], section["prefix"])


OUTPUT = OutputPlugin("example-summary", make, description="one line per CE with its free CPUs",
                      config_keys={"path": Option("path", "", "file written at each publish"),
                                   "prefix": Option("str", "", "put before each line")})
