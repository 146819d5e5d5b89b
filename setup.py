"""Build step setup.cfg cannot declare: the shipped LDIF templates as package data.

The templates have one copy, the source tree's ``templates/`` (the directory an
admin copies from to override them, ``[glue] templates_dir``).  glueinfo reads
them as the package data ``glueinfo/glue/ldif_templates/*.ldif``
(glueinfo.glue.templates.builtin_templates_dir), so building the package copies
``templates/*.ldif`` there.  An editable install copies nothing: it runs from the
source tree, where builtin_templates_dir reads ``templates/`` itself.
Everything else is declared in setup.cfg.
"""

import glob
import os

from setuptools import setup
from setuptools.command.build_py import build_py

TEMPLATES = "templates"
PACKAGE_DATA_DIR = os.path.join("glueinfo", "glue", "ldif_templates")


class BuildPyWithTemplates(build_py):
    """build_py, then templates/*.ldif into the built package's ldif_templates/."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        sources = sorted(glob.glob(os.path.join(TEMPLATES, "*.ldif")))
        if not sources:
            raise SystemExit(f"setup.py: no {TEMPLATES}/*.ldif in {os.getcwd()}: the package would ship no templates")
        target = os.path.join(self.build_lib, PACKAGE_DATA_DIR)
        self.mkpath(target)
        for source in sources:
            self.copy_file(source, os.path.join(target, os.path.basename(source)))


setup(cmdclass={"build_py": BuildPyWithTemplates})
