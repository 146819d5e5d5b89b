"""GLUE 2.0 (LDAP under o=glue, and the OGF JSON rendering) from the same assembled site as GLUE 1.3.

- ids.py -- ID forms and vocabulary per CE type (HTCondorCE, ARC-CE, CREAM, other);
- ces.py -- each CE's GLUE 2 values (type defaults under the admin's keys), health targets;
- health.py -- the endpoint health check the publish step runs (TCP connect, daemon process);
- times.py -- CreationTime/Validity with a caller-kept memory (CreationTimes);
- render.py -- ``glue2_entries(site, options, health=, now=, times=)``: the entries, parents first;
- accelerators.py -- GPUs: the GLUE 2.0 OtherInfo forms and the GLUE 2.1 accelerator classes, with
  glueinfo's LDAP schema of them (GLUE21-accelerators.schema, ``[glue] accelerator_schema``);
- check.py -- the entries normalised and checked against GLUE20.schema (glueinfo.glue.schema);
- json.py -- the same objects in the OGF GLUE 2 JSON rendering (GLUE 2.1's, accelerators included).

docs/glue2-mapping.md is the reference for what each attribute comes from.
"""

from glueinfo.glue.glue2.check import Glue2Build, check_glue2, load_glue2_schema
from glueinfo.glue.glue2.health import EndpointHealth, HealthTarget, check_endpoints
from glueinfo.glue.glue2.render import Glue2Options, glue2_entries
from glueinfo.glue.glue2.times import CreationTimes

__all__ = ["CreationTimes", "EndpointHealth", "Glue2Build", "Glue2Options", "HealthTarget", "check_endpoints", "check_glue2",
           "glue2_entries", "load_glue2_schema"]
