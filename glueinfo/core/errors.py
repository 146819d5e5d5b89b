"""glueinfo's exception tree, drawn in this one file.

Every error glueinfo raises on purpose derives from :class:`GlueinfoError`,
so a caller (a command, the daemon, a third-party tool embedding glueinfo)
can catch "anything glueinfo reports" in one clause and show its message:
by contract the message is one line that names what was wrong.  Below the
root, four intermediate classes say what kind of thing went wrong, and so
what the caller does about it:

- :class:`ConfigurationError`: the config or the command line is wrong; the
  admin must change it.  A command exits 2 (``check``: 3, Nagios's UNKNOWN).
- :class:`InputError`: data glueinfo read (a file, a snapshot, a worker's
  document, a client's request) is malformed.  The one input is refused and
  named; a command that cannot go on without it exits 1.
- :class:`PublicationError`: a document or an output cannot be made or
  written.  The old output stays as it was; a command exits 1, the daemon
  retries at its next publish.
- :class:`UpstreamError`: a server, worker or batch system glueinfo asks
  failed (unreachable, slow, an error status, an answer not in the shape
  asked for).  That source or CE fails alone and the rest is published; a
  command that has nothing left to publish exits 1.

A class stays in the module that raises it; the tree is drawn here.  Each
subclass also derives from the built-in type it used to be (``also``
below), so existing ``except ValueError`` code keeps working.  ``glueinfo``'s
``main`` catches GlueinfoError once: one line on stderr, ``glueinfo:
MESSAGE``, and the class's :attr:`GlueinfoError.exit_code`.

The tree (``tests/unit/core/test_errors.py`` checks it against the code:
every exception class in the package, its parent and its built-in bases)::

    GlueinfoError                   glueinfo.core.errors
        ConfigurationError          glueinfo.core.errors
            UsageError              glueinfo.core.errors
                StateLocked         glueinfo.site.state
                StoreLocked         glueinfo.federate.store
            ConfigError             glueinfo.core.config            also ValueError
            HostRangeError          glueinfo.core.hostrange         also ValueError
            CollectorError          glueinfo.host.collect
            SourceError             glueinfo.gather.registry
            LrmsError               glueinfo.lrms.registry
            VoMapError              glueinfo.lrms.vo_map            also ValueError
            SchemaError             glueinfo.glue.schema.parse      also ValueError
            SchemaUnavailable       glueinfo.glue.schema.load       also OSError
            TemplateError           glueinfo.glue.templates         also ValueError
            Glue2Error              glueinfo.glue.glue2.ces         also ValueError
            ServiceError            glueinfo.run.plan
            OutputError             glueinfo.publish.outputs
            TrustError              glueinfo.federate.trust
        InputError                  glueinfo.core.errors
            ModelError              glueinfo.core.model             also ValueError
            UnitError               glueinfo.core.units             also ValueError
            LDIFError               glueinfo.core.ldif              also ValueError
            DNError                 glueinfo.core.ldif              also ValueError
            XMLInputError           glueinfo.core.xmlsafe           also ValueError
            NodeXMLError            glueinfo.sss.node_reader        also ValueError
            PatternError            glueinfo.sss.node_patterns      also ValueError
            SSSRMAPError            glueinfo.sss.sssrmap.status
            ExpositionError         glueinfo.gather.sources.node_exporter  also ValueError
            GangliaError            glueinfo.gather.sources.ganglia also ValueError
            IdStateError            glueinfo.site.ids               also ValueError
        PublicationError            glueinfo.core.errors
            WriteError              glueinfo.core.atomicwrite       also OSError
            NodeRenderError         glueinfo.sss.node_templates     also ValueError
            HaizeaError             glueinfo.haizea.site            also ValueError
            OutboxError             glueinfo.publish.outbox
            PublishError            glueinfo.glue.ldap_connection
                ConnectionLost      glueinfo.glue.ldap_connection
        UpstreamError               glueinfo.core.errors
            PullError               glueinfo.gather.pull
            RetryableError          glueinfo.gather.pull
            PrometheusError         glueinfo.gather.sources.prometheus
            CommandError            glueinfo.core.bounded_run
                CommandTimedOut     glueinfo.core.bounded_run
                OutputTooLarge      glueinfo.core.bounded_run
                NotText             glueinfo.core.bounded_run
            LrmsQueryError          glueinfo.lrms.registry
                HTCondorOutputError glueinfo.lrms.plugins.htcondor
                LsfOutputError      glueinfo.lrms.plugins.lsf
                PbsOutputError      glueinfo.lrms.plugins.pbs
                PbsQueueError       glueinfo.lrms.plugins.pbs
                SgeOutputError      glueinfo.lrms.plugins.sge
                SlurmOutputError    glueinfo.lrms.plugins.slurm
            CheckError              glueinfo.commands.check
                Unreachable         glueinfo.commands.check

Module-private signals are no errors of glueinfo's: each is raised and
caught inside its own module, never reaches a caller, and carries no
message for a user.  They are listed so that a new one is seen::

    _Mismatch                       glueinfo.core.model
    _NotANumber                     glueinfo.sss.node_reader
    _NotJson                        glueinfo.gather.sources.prometheus  also ValueError
    _Refused                        glueinfo.run.http_server
    _Expired                        glueinfo.run.http_server
"""

from __future__ import annotations

from typing import ClassVar

EXIT_FAILED = 1
EXIT_USAGE = 2


class GlueinfoError(Exception):
    """An error glueinfo reports on purpose; ``str(error)`` is one line naming what was wrong.

    Raise a subclass: the intermediate class says what the caller does.
    ``exit_code`` is what ``glueinfo``'s ``main`` exits with when one
    reaches it: 1, the job failed."""

    exit_code: ClassVar[int] = EXIT_FAILED


class ConfigurationError(GlueinfoError):
    """The config file, a file it names, or the command line is wrong.

    Raised where a setting or an argument is read (an unknown collector,
    source or LRMS, a bad template, an unreadable password file).  The
    caller does not retry: a command exits 2 (a command's ``USAGE_EXIT``
    instead, ``check``'s 3), the daemon refuses a reloaded config and keeps
    the running one."""

    exit_code: ClassVar[int] = EXIT_USAGE


class UsageError(ConfigurationError):
    """A command's arguments (or environment, e.g. ``$GLUEINFO_CLOCK``) that cannot be used.

    Raised by the commands only; ``main`` prints it and exits 2."""


class InputError(GlueinfoError):
    """Data glueinfo read is malformed.

    Raised for a snapshot or Node XML file, a worker's or Ganglia's document,
    an LDIF file, a state file or a client's request that cannot be read.
    The caller refuses that one input and names it (a gather goes on without
    the host, the HTTP server answers the request with an error); a command
    that cannot go on without it exits 1."""


class PublicationError(GlueinfoError):
    """A document or an output that cannot be made or written.

    Raised for a file that cannot be replaced, an LDAP server that cannot be
    used, a site with no host left to describe.  What was published before
    stays as it was.  The caller (a command) exits 1; the daemon logs it,
    counts it for that output, and tries again at its next publish."""


class UpstreamError(GlueinfoError):
    """A server, worker or batch system glueinfo asks failed.

    Raised when it is unreachable, too slow, answers with an error status, or
    answers in a shape other than the one asked for.  The caller lets that
    source, target or CE fail alone: it is reported with its duration and
    error, nothing stale or invented is published for it, and the rest goes
    on.  A command left with nothing to publish exits 1."""
