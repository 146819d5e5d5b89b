"""Built-in probes, installed as ``glueinfo.providers``: one module per probe
(host collectors and LRMS plugins); they gather facts and never format output."""
