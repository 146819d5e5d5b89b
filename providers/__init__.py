"""Built-in collectors, installed as ``glueinfo.providers``: one module per probe.

Each module holds one ``COLLECTOR`` (a :class:`glueinfo.collect.Collector`)
whose function turns what :class:`glueinfo.linux.LinuxHost` reads into one
part of the host model.  Collectors never format output.
"""
