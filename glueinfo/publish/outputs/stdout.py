"""The ``stdout`` output: one document on standard output, for the one-shot commands.

Which document is the command's choice (``options["document"]``): ``ldif``
(what ``glueinfo ldif`` prints), ``node-xml`` (``node-xml --site``, ``pretty``
or not), ``glue2-json``, ``crr-json`` (nothing when the site has no CRR document).  Written as pieces where the document is made in
pieces, so a 100,000-host LDIF is never held whole.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from glueinfo.publish.outputs import OutputContext, OutputPlugin, OutputResult, Publication

DOCUMENTS = ("ldif", "node-xml", "glue2-json", "crr-json")


class StdoutOutput:
    name = "stdout"

    def __init__(self, document: str, stream: IO[bytes], pretty: bool = True) -> None:
        if document not in DOCUMENTS:
            raise ValueError(f"no document {document!r} (one of {', '.join(DOCUMENTS)})")
        self.document, self.stream, self.pretty = document, stream, pretty

    def publish(self, publication: Publication) -> OutputResult:
        documents = publication.documents
        if documents is None:
            return OutputResult()
        write = self.stream.write
        if self.document == "ldif":
            documents.write_ldif(self.stream)
        elif self.document == "node-xml":
            write(documents.node_xml(pretty=self.pretty))
        elif self.document == "crr-json":
            write(documents.crr_json or b"")
        else:
            write(documents.glue2_json or b"{}\n")
        self.stream.flush()
        return OutputResult(written=True)


def _make(context: OutputContext) -> StdoutOutput:
    options: Any = context.options
    return StdoutOutput(str(options.get("document", "ldif")), options.get("stream") or sys.stdout.buffer,
                        bool(options.get("pretty", True)))


OUTPUT = OutputPlugin("stdout", _make, description="one document (ldif, node-xml, glue2-json, crr-json) on standard output")
